//! Request bodies of the REST API. The extractor only reads the bytes; the handler parses them
//! with [`JsonBody::parse`] after it has checked who is asking, so a caller who may not use a
//! route hears 403 whatever its body says, and every rejection of a body is a JSON error.
//!
//! Routes that take JSON take it with no `Content-Type` or with the one `curl -d` sends
//! (`application/x-www-form-urlencoded`), so the spec's curl lines work verbatim. That is safe
//! only because authentication is bearer-only: no cookie rides along, so a page elsewhere cannot
//! make a browser send an authenticated "simple" request.

use std::marker::PhantomData;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::machines::{Error, Reason, Result};

/// A JSON request body, read but not yet parsed.
pub struct JsonBody<T> {
    bytes: Bytes,
    content_type: Option<String>,
    _of: PhantomData<fn() -> T>,
}

impl<S: Send + Sync, T> FromRequest<S> for JsonBody<T> {
    /// A body past the size limit answers the limit layer's own 413 (`server.rs`).
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let content_type = req.headers().get(CONTENT_TYPE).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let bytes = Bytes::from_request(req, state).await.map_err(IntoResponse::into_response)?;
        Ok(JsonBody { bytes, content_type, _of: PhantomData })
    }
}

/// JSON has one number type, and the document's `integer` admits `3.0`: a number with no
/// fraction is read as the integer it is, so a field typed as one takes it.
fn integral_numbers(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15) {
                *v = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers),
        Value::Object(fields) => fields.values_mut().for_each(integral_numbers),
        _ => {}
    }
}

/// Whether a body of this media type is read as JSON.
fn reads_as_json(content_type: Option<&str>) -> bool {
    let Some(ct) = content_type else { return true };
    let essence = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence.is_empty()
        || essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
        || essence == "application/x-www-form-urlencoded"
}

impl<T: DeserializeOwned + serde::Serialize> JsonBody<T> {
    /// The body as a `T`: 415 for a media type that is not JSON, 400 for text that is not JSON,
    /// 422 for JSON that does not fit (naming the field).
    pub fn parse(self) -> Result<T> {
        self.media_type()?;
        if self.bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(Error::bad_request("the request body is empty: send a JSON object"));
        }
        let mut value: serde_json::Value = serde_json::from_slice(&self.bytes)
            .map_err(|e| Error::bad_request(format!("the request body is not valid JSON: {e}")))?;
        integral_numbers(&mut value);
        let parsed: T = serde_path_to_error::deserialize(&value).map_err(|e| {
            let at = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_data() {
                let field = if at == "." { String::new() } else { format!(" at {at}") };
                Error::new(Reason::Invalid, format!("the request body does not fit this route{field}: {inner}"))
            } else {
                Error::bad_request(format!("the request body is not valid JSON: {inner}"))
            }
        })?;
        // serde reads a struct from an array too (`"runtime": [null, null]`); the document says
        // object, so an array where the type has an object is refused.
        if let Ok(read) = serde_json::to_value(&parsed)
            && let Some(at) = array_read_as_object(&value, &read, String::new())
        {
            return Err(Error::new(
                Reason::Invalid,
                format!("the request body does not fit this route at {at}: expected an object, got an array"),
            ));
        }
        Ok(parsed)
    }

    /// Like [`parse`](Self::parse), but an empty body is `None` (for routes whose body is optional).
    pub fn parse_optional(self) -> Result<Option<T>> {
        if self.bytes.iter().all(u8::is_ascii_whitespace) {
            self.media_type()?;
            return Ok(None);
        }
        self.parse().map(Some)
    }

    fn media_type(&self) -> Result<()> {
        if reads_as_json(self.content_type.as_deref()) {
            return Ok(());
        }
        Err(Error::new(
            Reason::UnsupportedMediaType,
            format!(
                "the request body is {}, but this route reads JSON: send Content-Type: application/json",
                self.content_type.as_deref().unwrap_or_default()
            ),
        ))
    }
}

/// Where `sent` has an array that `read` (what it deserialized to, serialized again) holds as an
/// object: a struct given as an array.
pub(crate) fn array_read_as_object(sent: &serde_json::Value, read: &serde_json::Value, at: String) -> Option<String> {
    use serde_json::Value;
    match (sent, read) {
        (Value::Array(_), Value::Object(_)) => Some(if at.is_empty() { ".".into() } else { at }),
        (Value::Object(s), Value::Object(r)) => r.iter().find_map(|(k, rv)| {
            let path = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
            s.get(k).and_then(|sv| array_read_as_object(sv, rv, path))
        }),
        (Value::Array(s), Value::Array(r)) => {
            s.iter().zip(r).enumerate().find_map(|(i, (sv, rv))| array_read_as_object(sv, rv, format!("{at}[{i}]")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    fn body(ct: Option<&str>, text: &str) -> JsonBody<serde_json::Map<String, serde_json::Value>> {
        JsonBody { bytes: Bytes::from(text.to_string()), content_type: ct.map(str::to_string), _of: PhantomData }
    }

    #[test]
    fn json_is_read_with_no_media_type_with_json_ones_and_with_curls_default() {
        for ct in [
            None,
            Some("application/json"),
            Some("application/json; charset=utf-8"),
            Some("application/merge-patch+json"),
            Some("application/x-www-form-urlencoded"),
            Some(""),
        ] {
            assert!(body(ct, r#"{"a": 1}"#).parse().is_ok(), "{ct:?}");
        }
        for ct in ["text/plain", "application/xml", "multipart/form-data; boundary=x", "application/octet-stream"] {
            let e = body(Some(ct), r#"{"a": 1}"#).parse().unwrap_err();
            assert_eq!(
                (e.status(), e.reason),
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, Reason::UnsupportedMediaType),
                "{ct}"
            );
            assert!(e.message.contains(ct) && e.message.contains("application/json"), "{}", e.message);
        }
    }

    #[test]
    fn bad_bodies_are_400_or_422_with_the_field() {
        let e = body(None, "{nope").parse().unwrap_err();
        assert_eq!((e.status(), e.reason), (StatusCode::BAD_REQUEST, Reason::BadRequest));
        assert!(e.message.starts_with("the request body is not valid JSON"), "{}", e.message);
        let e = body(None, "  ").parse().unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        #[derive(serde::Deserialize, serde::Serialize, Debug)]
        struct Req {
            name: String,
            size: u32,
        }
        let typed =
            |t: &str| JsonBody::<Req> { bytes: Bytes::from(t.to_string()), content_type: None, _of: PhantomData };
        let e = typed(r#"{"name": "a", "size": "big"}"#).parse().unwrap_err();
        assert_eq!((e.status(), e.reason), (StatusCode::UNPROCESSABLE_ENTITY, Reason::Invalid));
        assert!(e.message.contains("at size"), "{}", e.message);
        // An integral number written with a fraction is the integer.
        assert!(typed(r#"{"name": "a", "size": 2.0}"#).parse().is_ok());
        let e = typed(r#"{"name": "a", "size": 2.5}"#).parse().unwrap_err();
        assert_eq!(e.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let e = typed(r#"{"size": 1}"#).parse().unwrap_err();
        assert!(e.message.contains("missing field `name`"), "{}", e.message);
        assert!(typed("").parse_optional().unwrap().is_none());
        assert!(typed(r#"{"name": "a", "size": 2}"#).parse_optional().unwrap().is_some());
    }

    #[test]
    fn a_struct_given_as_an_array_is_refused_naming_where() {
        let spec = |t: &str| JsonBody::<kairon_model::MachineSpec> {
            bytes: Bytes::from(t.to_string()),
            content_type: None,
            _of: PhantomData,
        };
        let e = spec(r#"{"runtime": [null, null]}"#).parse().unwrap_err();
        assert_eq!((e.status(), e.reason), (StatusCode::UNPROCESSABLE_ENTITY, Reason::Invalid));
        assert!(e.message.contains("at runtime: expected an object, got an array"), "{}", e.message);
        let e = spec(r#"{"volumes": [["data"]]}"#).parse().unwrap_err();
        assert!(e.message.contains("at volumes[0]"), "{}", e.message);
        assert!(spec(r#"{"runtime": {}, "volumes": [{"name": "data", "size": "1Gi"}]}"#).parse().is_ok());
    }

    #[test]
    fn numbers_are_read_exactly() {
        // Without serde_json's float_roundtrip this was read as 2251799813685247.25, a fraction
        // the body never had: the integer field refused it.
        #[derive(serde::Deserialize, serde::Serialize, Debug)]
        struct Req {
            n: i64,
            f: f64,
        }
        let typed =
            |t: &str| JsonBody::<Req> { bytes: Bytes::from(t.to_string()), content_type: None, _of: PhantomData };
        let r = typed(r#"{"n": 2251799813685247.0, "f": 2251799813685246.5}"#).parse().unwrap();
        assert_eq!((r.n, r.f), (2_251_799_813_685_247, 2_251_799_813_685_246.5));
    }
}
