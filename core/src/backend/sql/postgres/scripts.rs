//! Hold scripts (`super::super::script`) on PostgreSQL: each one transaction on a connection of its own, one at a
//! time, its statements prepared once per connection.

use std::collections::HashMap;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use super::{PostgresBackend, hold_channel};
use crate::backend::HoldKind;
use crate::backend::sql::{Head, HoldRow, Param, Script};
use crate::error::{Error, Result};

/// The connection that runs hold scripts, with the statements prepared on it so far.
#[derive(Debug)]
pub(super) struct ScriptConn {
    client: Client,
    prepared: HashMap<String, Statement>,
}

/// A statement's parameters as the driver takes them.
fn sql_params(params: &[Param]) -> Vec<Box<dyn ToSql + Sync + Send>> {
    params
        .iter()
        .map(|p| -> Box<dyn ToSql + Sync + Send> {
            match p {
                Param::Int(i) => Box::new(*i),
                Param::Text(t) => Box::new(t.clone()),
            }
        })
        .collect()
}

impl PostgresBackend {
    /// Runs a hold script as one transaction on the script connection, notifying `kind`'s channel of the name at
    /// commit if it freed a hold: `(answer, rows written)`. A connection that stops answering is dropped.
    pub(super) async fn script<R>(&self, s: Script<R>, kind: HoldKind) -> Result<(R, u64)> {
        let mut slot = self.scripts.lock().await;
        if slot.as_ref().is_none_or(|c| c.client.is_closed()) {
            // The command connection made the tables; this one only needs to exist.
            self.session().await?;
            let (client, conn) = self.open_connection().await?;
            let url = self.url.clone();
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::debug!(backend = %url, error = %e, "script connection ended");
                }
            });
            *slot = Some(ScriptConn { client, prepared: Default::default() });
        }
        let Some(conn) = slot.as_mut() else { unreachable!("made above") };
        let channel = hold_channel(kind, &s.name);
        let outcome = tokio::time::timeout(self.opts.request_timeout, run_script(conn, &s, &channel)).await;
        match outcome {
            Ok(reply) => reply.map_err(|e| self.err(e)),
            Err(_) => {
                *slot = None;
                Err(Error::unavailable(format!("{}: no reply within {:?}", self.url, self.opts.request_timeout)))
            }
        }
    }
}

/// The body of [`PostgresBackend::script`]: the transaction, committed only if every statement succeeded (a
/// transaction dropped unfinished sends its ROLLBACK ahead of the connection's next request).
async fn run_script<R>(conn: &mut ScriptConn, s: &Script<R>, channel: &str) -> Result<(R, u64), tokio_postgres::Error> {
    let ScriptConn { client, prepared } = conn;
    let tx = client.transaction().await?;
    let mut statement = async |sql: &str| -> Result<Statement, tokio_postgres::Error> {
        if let Some(st) = prepared.get(sql) {
            return Ok(st.clone());
        }
        let st = tx.prepare(sql).await?;
        prepared.insert(sql.to_string(), st.clone());
        Ok(st)
    };
    let mut ensure = Vec::new();
    if let Some(w) = &s.ensure {
        ensure.push((statement(&w.sql).await?, sql_params(&w.params)));
    }
    let head_st = statement(&s.head).await?;
    let rows_st = match &s.rows {
        Some(q) => Some(statement(q).await?),
        None => None,
    };
    for (st, params) in ensure {
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref() as _).collect();
        tx.execute(&st, &refs).await?;
    }
    let head = tx.query_opt(&head_st, &[&s.name]).await?;
    let head = head.map(|r| -> Result<Head, tokio_postgres::Error> {
        Ok(Head { a: r.try_get(0)?, b: r.try_get(1)?, now: r.try_get(2)? })
    });
    let head = head.transpose()?;
    let mut rows = Vec::new();
    if let Some(st) = rows_st {
        for r in tx.query(&st, &[&s.name]).await? {
            rows.push(HoldRow {
                key: r.try_get(0)?,
                holder: r.try_get(1)?,
                expires_at: r.try_get(2)?,
                token: r.try_get(3)?,
            });
        }
    }
    let (writes, answer) = (s.decide)(head, &rows);
    let mut written = 0;
    for w in &writes {
        let st = statement(&w.sql).await?;
        let params = sql_params(&w.params);
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref() as _).collect();
        written += tx.execute(&st, &refs).await?;
    }
    if s.wakes && written > 0 {
        tx.execute("SELECT pg_notify($1, '')", &[&channel]).await?;
    }
    tx.commit().await?;
    Ok((answer, written))
}
