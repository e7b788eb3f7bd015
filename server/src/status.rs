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
