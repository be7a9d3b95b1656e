//! Kubernetes resource quantities (`"2"`, `500m`, `2Gi`, `512Mi`), parsed exactly enough to
//! schedule, size a VM and bill.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A quantity as written by the user; kept verbatim so objects round-trip unchanged.
/// Accepts a YAML/JSON number (`cpu: 2`) as well as a string, like Kubernetes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Quantity(pub String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0:?} is not a quantity: write a number with an optional suffix (m, k, M, G, Ki, Mi, Gi, Ti)")]
pub struct QuantityError(pub String);

impl Quantity {
    pub fn new(s: impl Into<String>) -> Self {
        Quantity(s.into())
    }

    /// The value in thousandths (millicores for CPU), rounded up as Kubernetes does.
    pub fn to_milli(&self) -> Result<i64, QuantityError> {
        let v = self.to_f64()?;
        Ok((v * 1000.0).ceil() as i64)
    }

    /// The value in base units (bytes for memory, cores for CPU).
    pub fn to_f64(&self) -> Result<f64, QuantityError> {
        let s = self.0.trim();
        let err = || QuantityError(self.0.clone());
        let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(s.len());
        let (num, suffix) = s.split_at(split);
        if num.is_empty() || num.starts_with('-') {
            return Err(err());
        }
        let n: f64 = num.parse().map_err(|_| err())?;
        let mult = match suffix {
            "" => 1.0,
            "m" => 1e-3,
            "k" => 1e3,
            "M" => 1e6,
            "G" => 1e9,
            "T" => 1e12,
            "P" => 1e15,
            "Ki" => 1024.0,
            "Mi" => 1024.0 * 1024.0,
            "Gi" => 1024.0 * 1024.0 * 1024.0,
            "Ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
            "Pi" => 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0,
            _ => return Err(err()),
        };
        if !n.is_finite() {
            return Err(err());
        }
        Ok(n * mult)
    }

    /// Whether the value is a whole number of base units (whole cores for CPU), decided on the
    /// decimal text as written, not on a float: `"4503599627370496.5"` is not whole, though the
    /// nearest `f64` is.
    pub fn is_whole(&self) -> Result<bool, QuantityError> {
        self.to_f64()?;
        let s = self.0.trim();
        let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+')).unwrap_or(s.len());
        let (num, suffix) = s.split_at(split);
        let num = num.trim_start_matches('+');
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        // The value is `digits × 10^ten × 2^two`, `digits` with no trailing zero.
        let mut digits: String = format!("{int}{frac}").trim_start_matches('0').to_string();
        let mut ten = -(frac.len() as i64);
        while digits.ends_with('0') {
            digits.pop();
            ten += 1;
        }
        if digits.is_empty() {
            return Ok(true);
        }
        let two: i64 = match suffix {
            "" | "m" | "k" | "M" | "G" | "T" | "P" => 0,
            "Ki" => 10,
            "Mi" => 20,
            "Gi" => 30,
            "Ti" => 40,
            "Pi" => 50,
            _ => return Err(QuantityError(self.0.clone())),
        };
        ten += match suffix {
            "m" => -3,
            "k" => 3,
            "M" => 6,
            "G" => 9,
            "T" => 12,
            "P" => 15,
            _ => 0,
        };
        if ten >= 0 {
            return Ok(true);
        }
        // `digits / 10^-ten × 2^two` is whole when 2^-ten divides 2^two (digits ends in no zero,
        // so it cannot hold a factor of 10) and 5^-ten divides digits.
        let need = -ten;
        if need > two || need > 55 {
            return Ok(false);
        }
        let five = 5u128.pow(need as u32);
        let rem = digits.bytes().fold(0u128, |r, d| (r * 10 + u128::from(d - b'0')) % five);
        Ok(rem == 0)
    }

    /// Whole bytes, for memory quantities.
    pub fn to_bytes(&self) -> Result<u64, QuantityError> {
        Ok(self.to_f64()?.ceil() as u64)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Quantity {
    fn from(s: &str) -> Self {
        Quantity(s.to_string())
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            S(String),
            I(i64),
            F(f64),
        }
        Ok(match Raw::deserialize(d)? {
            Raw::S(s) => Quantity(s),
            Raw::I(i) => Quantity(i.to_string()),
            Raw::F(f) => Quantity(f.to_string()),
        })
    }
}

impl JsonSchema for Quantity {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": true
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_and_memory() {
        assert_eq!(Quantity::from("2").to_milli(), Ok(2000));
        assert_eq!(Quantity::from("500m").to_milli(), Ok(500));
        assert_eq!(Quantity::from("0.5").to_milli(), Ok(500));
        assert_eq!(Quantity::from("2Gi").to_bytes(), Ok(2 * 1024 * 1024 * 1024));
        assert_eq!(Quantity::from("512Mi").to_bytes(), Ok(512 * 1024 * 1024));
        assert_eq!(Quantity::from("1G").to_bytes(), Ok(1_000_000_000));
    }

    #[test]
    fn wholeness_is_decided_on_the_decimal_text() {
        for whole in ["2", "+2", "2.0", "2000m", "0", "0.000", "1k", "1.5k", "0.5Ki", "0.25Ki", "2251799813685247"] {
            assert_eq!(Quantity::from(whole).is_whole(), Ok(true), "{whole}");
        }
        // From 2^52 up an f64 has no halves left: a float calls the 4th and 5th whole.
        for part in ["2.5", "1500m", "1m", "0.1", "9007199254740993.5", "4503599627370496.5", "0.1Ki", "1.0001k"] {
            assert_eq!(Quantity::from(part).is_whole(), Ok(false), "{part}");
        }
        assert!(Quantity::from("two").is_whole().is_err());
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "two", "2Gb", "-1", "Gi", "1.2.3"] {
            assert!(Quantity::from(bad).to_f64().is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn numbers_deserialize_as_quantities() {
        let q: Quantity = serde_json::from_str("2").unwrap();
        assert_eq!(q, Quantity::from("2"));
        let q: Quantity = serde_json::from_str("\"2Gi\"").unwrap();
        assert_eq!(serde_json::to_string(&q).unwrap(), "\"2Gi\"");
    }
}
