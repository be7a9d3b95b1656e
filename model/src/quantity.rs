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
