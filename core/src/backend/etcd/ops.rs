//! The KV requests the lock sends, built from etcd's messages, and what their replies hold.

pub(super) use fencelock_proto::etcdserverpb::Compare;
use fencelock_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use fencelock_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
use fencelock_proto::etcdserverpb::{
    DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, ResponseHeader, TxnRequest, TxnResponse, request_op,
    response_op,
};
use fencelock_proto::mvccpb::KeyValue;
use fencelock_proto::prefix_end;

/// One key.
pub(super) fn get(key: impl Into<Vec<u8>>) -> RangeRequest {
    RangeRequest { key: key.into(), ..Default::default() }
}

/// Every key under `prefix`.
pub(super) fn under(prefix: &str) -> RangeRequest {
    RangeRequest { key: prefix.into(), range_end: prefix_end(prefix.as_bytes()), ..Default::default() }
}

/// One key under `prefix`, any.
pub(super) fn any_under(prefix: &str) -> RangeRequest {
    RangeRequest { limit: 1, ..under(prefix) }
}

/// How many keys lie under `prefix` (a cheap read that proves an endpoint answers).
pub(super) fn count(prefix: &str) -> RangeRequest {
    RangeRequest { count_only: true, ..under(prefix) }
}

/// The first-created key under `prefix`: the lock's owner.
pub(super) fn first_created(prefix: &str) -> RangeRequest {
    RangeRequest {
        sort_target: SortTarget::Create as i32,
        sort_order: SortOrder::Ascend as i32,
        limit: 1,
        ..under(prefix)
    }
}

/// The key created last before `rev` under `prefix`: a waiter's predecessor.
pub(super) fn created_before(prefix: &str, rev: i64) -> RangeRequest {
    RangeRequest {
        sort_target: SortTarget::Create as i32,
        sort_order: SortOrder::Descend as i32,
        max_create_revision: rev - 1,
        limit: 1,
        ..under(prefix)
    }
}

/// The last-created keys under `prefix`, newest first, at most `limit`; only those created before `below` if it is
/// not 0.
pub(super) fn last_created(prefix: &str, below: i64, limit: i64) -> RangeRequest {
    RangeRequest {
        sort_target: SortTarget::Create as i32,
        sort_order: SortOrder::Descend as i32,
        max_create_revision: if below > 0 { below - 1 } else { 0 },
        limit,
        ..under(prefix)
    }
}

/// The keys (without values) under `prefix` created before `below` (every key if it is 0).
pub(super) fn keys_before(prefix: &str, below: i64) -> RangeRequest {
    RangeRequest { keys_only: true, max_create_revision: if below > 0 { below - 1 } else { 0 }, ..under(prefix) }
}

/// No key lies under `prefix` (a range compare against an empty range compares a zero key: create revision 0).
pub(super) fn none_under(prefix: &str) -> Compare {
    Compare { range_end: prefix_end(prefix.as_bytes()), ..created_at(prefix, 0) }
}

/// No key under `prefix` was created or changed after revision `rev`.
pub(super) fn unchanged_since(prefix: &str, rev: i64) -> Compare {
    Compare {
        result: CompareResult::Less as i32,
        target: CompareTarget::Mod as i32,
        key: prefix.into(),
        target_union: Some(TargetUnion::ModRevision(rev + 1)),
        range_end: prefix_end(prefix.as_bytes()),
    }
}

/// `key` exists and holds `value`.
pub(super) fn value_is(key: &str, value: &[u8]) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Value as i32,
        key: key.into(),
        target_union: Some(TargetUnion::Value(value.to_vec())),
        range_end: Vec::new(),
    }
}

/// `key` was created at `rev` (0: `key` does not exist).
pub(super) fn created_at(key: &str, rev: i64) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Create as i32,
        key: key.into(),
        target_union: Some(TargetUnion::CreateRevision(rev)),
        range_end: Vec::new(),
    }
}

/// `key` was last modified at `rev` (0: `key` does not exist).
pub(super) fn modified_at(key: &str, rev: i64) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Mod as i32,
        key: key.into(),
        target_union: Some(TargetUnion::ModRevision(rev)),
        range_end: Vec::new(),
    }
}

pub(super) fn put(key: &str, value: Vec<u8>, lease: i64) -> RequestOp {
    let put = PutRequest { key: key.into(), value, lease, ..Default::default() };
    RequestOp { request: Some(request_op::Request::RequestPut(put)) }
}

pub(super) fn read(range: RangeRequest) -> RequestOp {
    RequestOp { request: Some(request_op::Request::RequestRange(range)) }
}

pub(super) fn delete(key: &str) -> RequestOp {
    let delete = DeleteRangeRequest { key: key.into(), ..Default::default() };
    RequestOp { request: Some(request_op::Request::RequestDeleteRange(delete)) }
}

/// If every compare holds, `then`; otherwise `otherwise`.
pub(super) fn txn(when: Vec<Compare>, then: Vec<RequestOp>, otherwise: Vec<RequestOp>) -> TxnRequest {
    TxnRequest { compare: when, success: then, failure: otherwise }
}

/// The keys the `index`-th operation of a Txn read.
pub(super) fn kvs(resp: &mut TxnResponse, index: usize) -> Vec<KeyValue> {
    match resp.responses.get_mut(index).and_then(|r| r.response.as_mut()) {
        Some(response_op::Response::ResponseRange(range)) => std::mem::take(&mut range.kvs),
        _ => Vec::new(),
    }
}

/// How many keys the `index`-th operation of a Txn counted.
pub(super) fn counted(resp: &TxnResponse, index: usize) -> i64 {
    match resp.responses.get(index).and_then(|r| r.response.as_ref()) {
        Some(response_op::Response::ResponseRange(range)) => range.count,
        _ => 0,
    }
}

/// Whether a Txn's delete removed a key.
pub(super) fn deleted(resp: &TxnResponse) -> bool {
    resp.responses
        .iter()
        .any(|r| matches!(&r.response, Some(response_op::Response::ResponseDeleteRange(d)) if d.deleted > 0))
}

/// The store revision a reply was made at.
pub(super) fn revision(header: Option<&ResponseHeader>) -> i64 {
    header.map_or(0, |h| h.revision)
}
