//! fencelock errors as gRPC statuses (DESIGN.md §5): the code a gRPC client can branch on, the fencelock kind in the
//! `fencelock-error` metadata, the message unchanged.

use fencelock::{Error, ErrorKind};
use tonic::{Code, Status, metadata::MetadataValue};

/// The metadata key that carries the fencelock error kind (`LOCK_LOST`, …).
pub const KIND_KEY: &str = "fencelock-error";

/// The gRPC code for a fencelock error kind.
pub fn code_of(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::Timeout => Code::DeadlineExceeded,
        ErrorKind::LockLost | ErrorKind::NotHeld => Code::FailedPrecondition,
        // gRPC's own advice for a failed sequencer check.
        ErrorKind::Fenced => Code::Aborted,
        ErrorKind::Unavailable | ErrorKind::Closed => Code::Unavailable,
        ErrorKind::InvalidArgument => Code::InvalidArgument,
        ErrorKind::Unsupported => Code::Unimplemented,
        ErrorKind::Cancelled => Code::Cancelled,
        _ => Code::Internal,
    }
}

/// A status of kind `kind` with `message`.
pub fn status(kind: ErrorKind, message: impl Into<String>) -> Status {
    let mut s = Status::new(code_of(kind), message);
    s.metadata_mut().insert(KIND_KEY, MetadataValue::from_static(kind.as_str()));
    s
}

/// The status for a fencelock error.
pub fn from_error(e: Error) -> Status {
    status(e.kind(), e.message())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_design_code_and_metadata() {
        let expected = [
            (ErrorKind::Timeout, Code::DeadlineExceeded),
            (ErrorKind::LockLost, Code::FailedPrecondition),
            (ErrorKind::NotHeld, Code::FailedPrecondition),
            (ErrorKind::Fenced, Code::Aborted),
            (ErrorKind::Unavailable, Code::Unavailable),
            (ErrorKind::InvalidArgument, Code::InvalidArgument),
            (ErrorKind::Unsupported, Code::Unimplemented),
            (ErrorKind::Closed, Code::Unavailable),
            (ErrorKind::Cancelled, Code::Cancelled),
            (ErrorKind::Internal, Code::Internal),
        ];
        assert_eq!(expected.len(), ErrorKind::ALL.len());
        for (kind, code) in expected {
            let s = from_error(Error::new(kind, "lock \"x\": because"));
            assert_eq!((s.code(), s.message()), (code, "lock \"x\": because"), "{kind}");
            assert_eq!(s.metadata().get(KIND_KEY).unwrap(), kind.as_str());
        }
    }
}

/// The time left of the caller's deadline (its `grpc-timeout` header), less a margin, for [`before_deadline`].
/// `None`: no deadline, or one that cannot be read.
pub fn caller_deadline(metadata: &tonic::metadata::MetadataMap) -> Option<std::time::Duration> {
    use std::time::Duration;
    let value = metadata.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    let total = match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    };
    Some(total.saturating_sub((total / 4).min(Duration::from_millis(50))))
}

/// `call`, ended with fencelockd's own `DEADLINE_EXCEEDED` once `deadline` passes. tonic answers a request whose
/// `grpc-timeout` passed with `CANCELLED` ("Timeout expired"), where etcd answers `DEADLINE_EXCEEDED`, the code etcd's
/// clients check for. tonic starts its timer when the request arrives, this one when the handler starts: the margin
/// [`caller_deadline`] takes off (a quarter, at most 50 ms) covers the time between, and since tonic polls the call
/// before its own timer, this one answers whenever it is due first. Dropping `call` is safe: an acquire in flight
/// leaves nothing behind.
pub async fn before_deadline<T>(
    deadline: Option<std::time::Duration>,
    call: impl std::future::Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    let Some(d) = deadline else { return call.await };
    tokio::time::timeout(d, call).await.unwrap_or_else(|_| {
        Err(status(ErrorKind::Timeout, format!("the caller's deadline passed while waiting (after {d:?})")))
    })
}

#[cfg(test)]
mod deadline_tests {
    use super::caller_deadline;
    use std::time::Duration;
    use tonic::metadata::MetadataMap;

    fn with(value: &str) -> Option<Duration> {
        let mut m = MetadataMap::new();
        m.insert("grpc-timeout", value.parse().unwrap());
        caller_deadline(&m)
    }

    #[test]
    fn reads_grpc_timeout_and_keeps_a_margin() {
        assert_eq!(with("1000m"), Some(Duration::from_millis(950)));
        assert_eq!(with("2S"), Some(Duration::from_millis(1950)));
        assert_eq!(with("100000u"), Some(Duration::from_millis(75)));
        assert_eq!(with("1H"), Some(Duration::from_secs(3600) - Duration::from_millis(50)));
        assert_eq!(with("12x"), None);
        assert_eq!(with("m"), None);
        assert_eq!(caller_deadline(&MetadataMap::new()), None);
    }
}
