//! Guest files as streams: a download is read a chunk at a time as the client takes it, an
//! upload written as it arrives, so neither is ever held whole in memory (by the runtime or
//! by the API in front of it).

use axum::body::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::engine::RuntimeError;

/// Bytes as they are read or received.
pub type ByteStream = BoxStream<'static, std::io::Result<Bytes>>;

/// A guest file being read: its size when the backend knows it up front, and its bytes.
pub struct FileRead {
    pub len: Option<u64>,
    pub body: ByteStream,
}

/// The size of the chunks a file is read in.
pub const CHUNK: usize = 256 * 1024;

/// `reader`'s bytes as a stream of chunks.
pub fn chunks(reader: impl AsyncRead + Send + Unpin + 'static) -> ByteStream {
    futures::stream::unfold(Some(reader), |r| async move {
        let mut r = r?;
        let mut buf = vec![0u8; CHUNK];
        match r.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), Some(r)))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
    .boxed()
}

/// Writes all of `data` to `out` and flushes it; the bytes written. A broken upload and a
/// failed write (a full disk) are told apart in the error.
pub async fn copy_in(
    mut data: ByteStream,
    out: &mut (impl AsyncWrite + Unpin),
    path: &str,
) -> Result<u64, RuntimeError> {
    let mut n = 0u64;
    while let Some(chunk) = data.next().await {
        let chunk = chunk.map_err(|e| broken(path, e))?;
        out.write_all(&chunk).await.map_err(|e| RuntimeError::Internal(format!("writing {path}: {e}")))?;
        n += chunk.len() as u64;
    }
    out.flush().await.map_err(|e| RuntimeError::Internal(format!("writing {path}: {e}")))?;
    Ok(n)
}

/// The upload of `path` stopped before its end (the client went away, or sent more than it
/// may): nothing was written.
pub fn broken(path: &str, e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Invalid(format!("the upload of {path} broke off ({e}); the file was left as it was"))
}

/// An RFC 3339 UTC time of `secs` (and `nanos`) since the epoch, as `FileEntry::modified` has it.
pub fn file_time(secs: i64, nanos: u32) -> Option<String> {
    chrono::DateTime::from_timestamp(secs, nanos).map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}
