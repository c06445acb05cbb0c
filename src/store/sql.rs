//! One way to speak SQL to either store: a capability writes its statements once, in SQLite's
//! dialect, against [`Sql`], and runs unchanged on the embedded SQLite file and on a team's
//! PostgreSQL database.
//!
//! What differs between the two is kept here, in a short, fixed list of rewrites that
//! [`to_postgres`] applies (and its tests pin):
//! - `?N` placeholders become `$N`;
//! - `ifnull(` becomes `coalesce(`, `instr(` becomes `strpos(` (same arguments, same answer);
//! - `INDEXED BY <index>` (a hint to SQLite's planner) is dropped;
//! - `IS ?N` (SQLite's null-safe equality) becomes `IS NOT DISTINCT FROM $N`;
//! - `INSERT OR IGNORE INTO …` becomes `INSERT INTO … ON CONFLICT DO NOTHING`;
//! - `ON CONFLICT(cols)` becomes `ON CONFLICT(team_project, cols)`: on PostgreSQL every table
//!   of a project's data carries the project (`team_project`, filled in from the transaction's
//!   `car.project` and checked by row-level security), and every unique key starts with it.
//!
//! Values cross as [`Value`] (SQLite's five storage classes); a PostgreSQL parameter is sent as
//! whatever type the statement expects of it, and a column of any type this store uses reads
//! back as the matching class, so `i64`, `f64`, `String`, `Vec<u8>` and `bool` read the same
//! on both.

use std::fmt;

use super::StoreError;

/// A value as SQLite stores it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Value {
    fn class(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Int(_) => "an integer",
            Value::Real(_) => "a real",
            Value::Text(_) => "text",
            Value::Blob(_) => "a blob",
        }
    }
}

/// A statement parameter.
pub trait Param {
    fn value(&self) -> Value;
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl Param for $t {
            fn value(&self) -> Value {
                Value::Int(*self as i64)
            }
        }
    )*};
}
int_param!(i64, i32, u32, u16, u8, usize);

impl Param for bool {
    fn value(&self) -> Value {
        Value::Int(i64::from(*self))
    }
}
impl Param for f64 {
    fn value(&self) -> Value {
        Value::Real(*self)
    }
}
impl Param for f32 {
    fn value(&self) -> Value {
        Value::Real(f64::from(*self))
    }
}
impl Param for str {
    fn value(&self) -> Value {
        Value::Text(self.to_string())
    }
}
impl Param for String {
    fn value(&self) -> Value {
        Value::Text(self.clone())
    }
}
impl Param for [u8] {
    fn value(&self) -> Value {
        Value::Blob(self.to_vec())
    }
}
impl Param for Vec<u8> {
    fn value(&self) -> Value {
        Value::Blob(self.clone())
    }
}
impl Param for Value {
    fn value(&self) -> Value {
        self.clone()
    }
}
impl<T: Param + ?Sized> Param for &T {
    fn value(&self) -> Value {
        (**self).value()
    }
}
impl<T: Param> Param for Option<T> {
    fn value(&self) -> Value {
        match self {
            Some(v) => v.value(),
            None => Value::Null,
        }
    }
}

/// Statement parameters: `args![a, b, c]`.
#[macro_export]
macro_rules! sql_args {
    ($($p:expr),* $(,)?) => {
        &[$(&$p as &dyn $crate::store::sql::Param),*] as &[&dyn $crate::store::sql::Param]
    };
}
pub use crate::sql_args as args;

/// Rows a multi-row statement takes at most. Rows go in chunks whose sizes are powers of two
/// up to this ([`chunks`]), so few distinct statements are ever prepared.
pub const CHUNK: usize = 32;

/// `items` in chunks of powers of two, largest first (13 rows: 8, 4, 1).
pub fn chunks<T>(mut items: &[T]) -> impl Iterator<Item = &[T]> {
    std::iter::from_fn(move || {
        if items.is_empty() {
            return None;
        }
        let size = 1usize << items.len().min(CHUNK).ilog2();
        let (chunk, rest) = items.split_at(size);
        items = rest;
        Some(chunk)
    })
}

/// `VALUES`' rows: `rows` of `width` numbered slots, `(?1, ?2), (?3, ?4)`.
pub fn values(rows: usize, width: usize) -> String {
    let mut out = String::with_capacity(rows * width * 5);
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for c in 0..width {
            if c > 0 {
                out.push_str(", ");
            }
            out.push_str(&format!("?{}", r * width + c + 1));
        }
        out.push(')');
    }
    out
}

/// A type a column reads back as.
pub trait FromValue: Sized {
    fn from_value(value: Value) -> Result<Self, String>;
}

impl FromValue for Value {
    fn from_value(value: Value) -> Result<Self, String> {
        Ok(value)
    }
}
impl FromValue for i64 {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Int(i) => Ok(i),
            other => Err(format!("expected an integer, found {}", other.class())),
        }
    }
}
/// Integers of other widths: an `i64` that must fit.
macro_rules! narrow_int {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(value: Value) -> Result<Self, String> {
                let i = i64::from_value(value)?;
                <$t>::try_from(i).map_err(|_| format!("{i} does not fit {}", stringify!($t)))
            }
        }
    )*};
}
narrow_int!(i32, u32, usize);

impl FromValue for bool {
    fn from_value(value: Value) -> Result<Self, String> {
        Ok(i64::from_value(value)? != 0)
    }
}
impl FromValue for f64 {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Real(f) => Ok(f),
            Value::Int(i) => Ok(i as f64),
            other => Err(format!("expected a real, found {}", other.class())),
        }
    }
}
impl FromValue for String {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Text(s) => Ok(s),
            other => Err(format!("expected text, found {}", other.class())),
        }
    }
}
impl FromValue for Vec<u8> {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Blob(b) => Ok(b),
            other => Err(format!("expected a blob, found {}", other.class())),
        }
    }
}
impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// One result row.
#[derive(Debug, Clone)]
pub struct Row {
    names: std::sync::Arc<[String]>,
    values: Vec<Value>,
}

/// A column of a row: by position, or by name.
pub trait Column: fmt::Display {
    fn position(&self, names: &[String]) -> Option<usize>;
}

impl Column for usize {
    fn position(&self, names: &[String]) -> Option<usize> {
        (*self < names.len()).then_some(*self)
    }
}

impl Column for &str {
    fn position(&self, names: &[String]) -> Option<usize> {
        names.iter().position(|n| n.eq_ignore_ascii_case(self))
    }
}

impl Row {
    /// Column `column` (a position or a name), as `T`.
    pub fn get<T: FromValue>(&self, column: impl Column) -> Result<T, StoreError> {
        let value = column
            .position(&self.names)
            .and_then(|i| self.values.get(i))
            .cloned()
            .ok_or_else(|| StoreError::Decode(format!("no column {column}")))?;
        T::from_value(value).map_err(|e| StoreError::Decode(format!("column {column}: {e}")))
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// Which engine a connection speaks to (for the few statements that must differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dialect::Sqlite => "SQLite",
            Dialect::Postgres => "PostgreSQL",
        })
    }
}

/// A connection (or a transaction on one), in SQLite's dialect whatever the engine.
pub trait Sql {
    fn dialect(&self) -> Dialect;

    /// Runs a statement; returns how many rows it changed.
    fn execute(&self, sql: &str, params: &[&dyn Param]) -> Result<usize, StoreError>;

    /// Runs statements in order; returns the rows each returned (`RETURNING`). On PostgreSQL
    /// they go to the server together (one round trip, not one each); the first failure stops
    /// the rest.
    fn query_all(&self, statements: &[(&str, &[&dyn Param])]) -> Result<Vec<Vec<Row>>, StoreError> {
        statements
            .iter()
            .map(|(sql, params)| self.query(sql, params))
            .collect()
    }

    /// [`Sql::query_all`] for a transaction's last statements: on PostgreSQL the commit goes
    /// with them, in their round trip, so the transaction is over when this returns (nothing
    /// may be asked of it after; its owner does not commit again). On SQLite the owner
    /// commits after, as ever.
    fn query_all_last(
        &self,
        statements: &[(&str, &[&dyn Param])],
    ) -> Result<Vec<Vec<Row>>, StoreError> {
        self.query_all(statements)
    }

    /// Calls `each` with every row, in order.
    fn for_each(
        &self,
        sql: &str,
        params: &[&dyn Param],
        each: &mut dyn FnMut(Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// [`Sql::for_each`] for a statement planned for these very values and not kept: one
    /// whose text varies with its parameters (an `IN` list of keys). On PostgreSQL a kept
    /// statement's plan can be the generic one made while the table was small (a filter over
    /// the project's rows where an index lookup is right), kept as the table grows.
    fn for_each_planned(
        &self,
        sql: &str,
        params: &[&dyn Param],
        each: &mut dyn FnMut(Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.for_each(sql, params, each)
    }

    /// Every row.
    fn query(&self, sql: &str, params: &[&dyn Param]) -> Result<Vec<Row>, StoreError> {
        let mut rows = Vec::new();
        self.for_each(sql, params, &mut |row| {
            rows.push(row);
            Ok(())
        })?;
        Ok(rows)
    }

    /// The first row, if any.
    fn query_opt(&self, sql: &str, params: &[&dyn Param]) -> Result<Option<Row>, StoreError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// The first row; no row is an error.
    fn query_one(&self, sql: &str, params: &[&dyn Param]) -> Result<Row, StoreError> {
        self.query_opt(sql, params)?
            .ok_or_else(|| StoreError::Decode("the query returned no row".into()))
    }
}

impl dyn Sql + '_ {
    /// The first column of the first row, if there is a row.
    pub fn value<T: FromValue>(
        &self,
        sql: &str,
        params: &[&dyn Param],
    ) -> Result<Option<T>, StoreError> {
        self.query_opt(sql, params)?.map(|r| r.get(0)).transpose()
    }
}

/// The parameters' values, to bind.
fn values_of(params: &[&dyn Param]) -> Vec<Value> {
    params.iter().map(|p| p.value()).collect()
}

// ---- SQLite ----

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

fn from_sqlite(value: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

impl Sql for rusqlite::Connection {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&self, sql: &str, params: &[&dyn Param]) -> Result<usize, StoreError> {
        let values = values_of(params);
        Ok(self
            .prepare_cached(sql)?
            .execute(rusqlite::params_from_iter(values.iter()))?)
    }

    fn for_each(
        &self,
        sql: &str,
        params: &[&dyn Param],
        each: &mut dyn FnMut(Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let values = values_of(params);
        let mut stmt = self.prepare_cached(sql)?;
        let names: std::sync::Arc<[String]> = stmt.column_names().map(|n| n.to_string()).collect();
        let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
        while let Some(row) = rows.next()? {
            let mut cells = Vec::with_capacity(names.len());
            for i in 0..names.len() {
                cells.push(from_sqlite(row.get_ref(i)?));
            }
            each(Row {
                names: names.clone(),
                values: cells,
            })?;
        }
        Ok(())
    }
}

// ---- PostgreSQL ----

mod pg {
    use bytes::BytesMut;
    use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};

    use super::Value;

    type BoxError = Box<dyn std::error::Error + Sync + Send>;

    /// Encodes `values` as `statement` takes them, to nowhere: whether sending them would fail.
    pub(super) fn encodes(
        statement: &tokio_postgres::Statement,
        values: &[Value],
    ) -> Result<(), BoxError> {
        let types = statement.params();
        if types.len() != values.len() {
            return Err(format!("{} values for {} parameters", values.len(), types.len()).into());
        }
        let mut out = BytesMut::new();
        for (value, ty) in values.iter().zip(types) {
            out.clear();
            value.to_sql_checked(ty, &mut out)?;
        }
        Ok(())
    }

    impl ToSql for Value {
        fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
            let mismatch = || -> BoxError {
                format!("cannot send {} as PostgreSQL type {ty}", self.class()).into()
            };
            match self {
                Value::Null => Ok(IsNull::Yes),
                Value::Int(i) => match *ty {
                    Type::INT8 => i.to_sql(ty, out),
                    Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                    Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                    Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                    Type::FLOAT4 => (*i as f32).to_sql(ty, out),
                    Type::BOOL => (*i != 0).to_sql(ty, out),
                    Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                        i.to_string().to_sql(&Type::TEXT, out)
                    }
                    _ => Err(mismatch()),
                },
                Value::Real(f) => match *ty {
                    Type::FLOAT8 => f.to_sql(ty, out),
                    Type::FLOAT4 => (*f as f32).to_sql(ty, out),
                    Type::TEXT | Type::VARCHAR | Type::UNKNOWN => {
                        f.to_string().to_sql(&Type::TEXT, out)
                    }
                    _ => Err(mismatch()),
                },
                Value::Text(s) => match *ty {
                    Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                        s.as_str().to_sql(&Type::TEXT, out)
                    }
                    Type::INT8 => s.trim().parse::<i64>()?.to_sql(ty, out),
                    _ => Err(mismatch()),
                },
                Value::Blob(b) => match *ty {
                    Type::BYTEA => b.as_slice().to_sql(ty, out),
                    _ => Err(mismatch()),
                },
            }
        }

        fn accepts(_: &Type) -> bool {
            true
        }

        to_sql_checked!();
    }

    impl<'a> FromSql<'a> for Value {
        fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
            Ok(match *ty {
                Type::INT8 => Value::Int(i64::from_sql(ty, raw)?),
                Type::INT4 => Value::Int(i32::from_sql(ty, raw)?.into()),
                Type::INT2 => Value::Int(i16::from_sql(ty, raw)?.into()),
                Type::BOOL => Value::Int(bool::from_sql(ty, raw)?.into()),
                Type::FLOAT8 => Value::Real(f64::from_sql(ty, raw)?),
                Type::FLOAT4 => Value::Real(f32::from_sql(ty, raw)?.into()),
                Type::BYTEA => Value::Blob(raw.to_vec()),
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                    Value::Text(<&str>::from_sql(ty, raw)?.to_string())
                }
                _ => return Err(format!("CAR does not read PostgreSQL type {ty}").into()),
            })
        }

        fn from_sql_null(_: &Type) -> Result<Self, BoxError> {
            Ok(Value::Null)
        }

        fn accepts(_: &Type) -> bool {
            true
        }
    }
}

/// A PostgreSQL transaction driven from synchronous code: each statement blocks the calling
/// thread (never one of the runtime's own workers) until the runtime's connection answers.
pub struct PgTx<'a> {
    /// A connection inside a transaction its owner began and will end.
    pub(super) tx: &'a deadpool_postgres::ClientWrapper,
    pub(super) rt: super::postgres::Driver<'a>,
    /// The statements that begin the transaction, until they are sent: they go with the
    /// transaction's first statement, in its round trip.
    pub(super) begin: std::cell::Cell<Option<String>>,
    /// The commit went with the last statements ([`Sql::query_all_last`]).
    pub(super) committed: std::cell::Cell<bool>,
}

impl PgTx<'_> {
    /// Runs `work` on the connection, after the transaction's opening statements when they
    /// are still to be sent (written before `work`'s, answered in order: one round trip).
    fn run<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, tokio_postgres::Error> {
        debug_assert!(
            !self.committed.get(),
            "a statement after the transaction's commit"
        );
        let begin = self.begin.take();
        self.rt.block_on(async {
            match begin {
                Some(begin) => {
                    let (_, value) =
                        futures_util::future::try_join(self.tx.batch_execute(&begin), work).await?;
                    Ok(value)
                }
                None => work.await,
            }
        })
    }

    /// Runs `statements` together, and the commit after them when `commit`. Every statement
    /// is prepared first (those new to this connection in one round trip, apart), then all are
    /// executed together: tokio-postgres writes each request before reading any answer, in the
    /// order they are polled, so the server runs them in order and the client waits once. A
    /// statement the server refuses aborts the transaction, and the commit then rolls it back.
    /// Values that fail to encode would not be: their statement alone is not sent, the ones
    /// after it are, and the commit would take them. So with `commit` every value is encoded
    /// before anything is sent.
    fn pipeline(
        &self,
        statements: &[(&str, &[&dyn Param])],
        commit: bool,
    ) -> Result<Vec<Vec<Row>>, StoreError> {
        let prepared: Vec<(String, Vec<Value>)> = statements
            .iter()
            .map(|(sql, params)| (to_postgres(sql), values_of(params)))
            .collect();
        let kept = self.rt.block_on(futures_util::future::try_join_all(
            prepared.iter().map(|(sql, _)| self.tx.prepare_cached(sql)),
        ))?;
        if commit {
            for (statement, (sql, values)) in kept.iter().zip(&prepared) {
                pg::encodes(statement, values).map_err(|e| {
                    StoreError::Postgres(format!("cannot send the values of `{sql}`: {e}"))
                })?;
            }
        }
        let values: Vec<_> = prepared.iter().map(|(_, values)| refs(values)).collect();
        let answers = self.run(async {
            let queries = futures_util::future::try_join_all(
                kept.iter()
                    .zip(&values)
                    .map(|(stmt, values)| self.tx.query(stmt, values)),
            );
            if commit {
                let (answers, ()) =
                    futures_util::future::try_join(queries, self.tx.batch_execute("COMMIT"))
                        .await?;
                Ok(answers)
            } else {
                queries.await
            }
        })?;
        self.committed.set(commit);
        answers
            .into_iter()
            .map(|rows| {
                let mut out = Vec::with_capacity(rows.len());
                pg_rows(rows, &mut |row| {
                    out.push(row);
                    Ok(())
                })?;
                Ok(out)
            })
            .collect()
    }

    /// Whether anything was sent (the transaction began).
    pub(super) fn began(&self) -> bool {
        let begin = self.begin.take();
        let began = begin.is_none();
        self.begin.set(begin);
        began
    }
}

fn refs(values: &[Value]) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
    values
        .iter()
        .map(|v| v as &(dyn tokio_postgres::types::ToSql + Sync))
        .collect()
}

impl Sql for PgTx<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn query_all(&self, statements: &[(&str, &[&dyn Param])]) -> Result<Vec<Vec<Row>>, StoreError> {
        self.pipeline(statements, false)
    }

    fn query_all_last(
        &self,
        statements: &[(&str, &[&dyn Param])],
    ) -> Result<Vec<Vec<Row>>, StoreError> {
        self.pipeline(statements, true)
    }

    fn execute(&self, sql: &str, params: &[&dyn Param]) -> Result<usize, StoreError> {
        let sql = to_postgres(sql);
        let values = values_of(params);
        let n = self.run(async {
            let stmt = self.tx.prepare_cached(&sql).await?;
            self.tx.execute(&stmt, &refs(&values)).await
        })?;
        Ok(n as usize)
    }

    fn for_each(
        &self,
        sql: &str,
        params: &[&dyn Param],
        each: &mut dyn FnMut(Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let sql = to_postgres(sql);
        let values = values_of(params);
        let rows = self.run(async {
            let stmt = self.tx.prepare_cached(&sql).await?;
            self.tx.query(&stmt, &refs(&values)).await
        })?;
        pg_rows(rows, each)
    }

    fn for_each_planned(
        &self,
        sql: &str,
        params: &[&dyn Param],
        each: &mut dyn FnMut(Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        use tokio_postgres::types::Type;
        let sql = to_postgres(sql);
        let values = values_of(params);
        // Typed parameters let the statement go in the same round trip as its values
        // (parse, bind, execute: the server plans it for them); a NULL has no type to give.
        let typed: Option<Vec<(&(dyn tokio_postgres::types::ToSql + Sync), Type)>> = values
            .iter()
            .map(|v| {
                let ty = match v {
                    Value::Int(_) => Type::INT8,
                    Value::Real(_) => Type::FLOAT8,
                    Value::Text(_) => Type::TEXT,
                    Value::Blob(_) => Type::BYTEA,
                    Value::Null => return None,
                };
                Some((v as &(dyn tokio_postgres::types::ToSql + Sync), ty))
            })
            .collect();
        let rows = self.run(async {
            match &typed {
                Some(typed) => self.tx.query_typed(&sql, typed).await,
                None => {
                    let stmt = self.tx.prepare(&sql).await?;
                    self.tx.query(&stmt, &refs(&values)).await
                }
            }
        })?;
        pg_rows(rows, each)
    }
}

/// Hands PostgreSQL's rows to `each` as [`Row`]s.
fn pg_rows(
    rows: Vec<tokio_postgres::Row>,
    each: &mut dyn FnMut(Row) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let mut names: Option<std::sync::Arc<[String]>> = None;
    for row in rows {
        let names = names
            .get_or_insert_with(|| row.columns().iter().map(|c| c.name().to_string()).collect())
            .clone();
        let mut cells = Vec::with_capacity(row.len());
        for i in 0..row.len() {
            cells.push(row.try_get::<_, Value>(i)?);
        }
        each(Row {
            names,
            values: cells,
        })?;
    }
    Ok(())
}

/// Rewrites a statement in SQLite's dialect into PostgreSQL's (see the module's list). Quoted
/// text and identifiers pass through untouched.
pub fn to_postgres(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 32);
    let bytes = sql.as_bytes();
    let mut i = 0;
    let mut ignore = false;
    let starts = |at: usize, word: &str| {
        bytes.len() >= at + word.len()
            && bytes[at..at + word.len()].eq_ignore_ascii_case(word.as_bytes())
            && (at == 0 || !is_word(bytes[at - 1]))
    };
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\'' | b'"' => {
                let end = sql[i + 1..]
                    .find(c as char)
                    .map_or(sql.len(), |j| i + 1 + j + 1);
                out.push_str(&sql[i..end]);
                i = end;
            }
            b'?' => {
                let digits = sql[i + 1..].bytes().take_while(u8::is_ascii_digit).count();
                out.push('$');
                out.push_str(&sql[i + 1..i + 1 + digits]);
                i += 1 + digits;
            }
            _ if starts(i, "INSERT OR IGNORE INTO") => {
                out.push_str("INSERT INTO");
                ignore = true;
                i += "INSERT OR IGNORE INTO".len();
            }
            _ if starts(i, "ifnull(") => {
                out.push_str("coalesce(");
                i += "ifnull(".len();
            }
            _ if starts(i, "instr(") => {
                out.push_str("strpos(");
                i += "instr(".len();
            }
            _ if starts(i, "INDEXED BY ") => {
                i += "INDEXED BY ".len();
                while i < bytes.len() && is_word(bytes[i]) {
                    i += 1;
                }
            }
            _ if starts(i, "IS ?") => {
                out.push_str("IS NOT DISTINCT FROM ");
                i += "IS ".len();
            }
            _ if starts(i, "ON CONFLICT") => {
                let rest = &sql[i + "ON CONFLICT".len()..];
                let gap = rest.len() - rest.trim_start().len();
                if rest.trim_start().starts_with('(') {
                    out.push_str("ON CONFLICT(team_project, ");
                    i += "ON CONFLICT".len() + gap + 1;
                } else {
                    out.push_str("ON CONFLICT");
                    i += "ON CONFLICT".len();
                }
            }
            _ => {
                let ch = sql[i..].chars().next().unwrap_or(' ');
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    if ignore {
        let trimmed = out.trim_end().trim_end_matches(';').len();
        out.truncate(trimmed);
        // Before a RETURNING clause, which comes last.
        match out.to_ascii_uppercase().rfind(" RETURNING ") {
            Some(at) => out.insert_str(at, " ON CONFLICT DO NOTHING"),
            None => out.push_str(" ON CONFLICT DO NOTHING"),
        }
    }
    out
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_sqlite_statements_for_postgres() {
        assert_eq!(
            to_postgres("SELECT id FROM t WHERE a = ?1 AND b IS ?2 AND c = '?3 IS ?4'"),
            "SELECT id FROM t WHERE a = $1 AND b IS NOT DISTINCT FROM $2 AND c = '?3 IS ?4'"
        );
        assert_eq!(
            to_postgres("INSERT OR IGNORE INTO e(src, dst) SELECT ?1, ?2 WHERE EXISTS (SELECT 1)"),
            "INSERT INTO e(src, dst) SELECT $1, $2 WHERE EXISTS (SELECT 1) ON CONFLICT DO NOTHING"
        );
        assert_eq!(
            to_postgres("INSERT OR IGNORE INTO e(src) SELECT ?1 WHERE TRUE RETURNING 1"),
            "INSERT INTO e(src) SELECT $1 WHERE TRUE ON CONFLICT DO NOTHING RETURNING 1"
        );
        assert_eq!(
            to_postgres(
                "INSERT INTO s(p, t) VALUES (?1, ?2) ON CONFLICT(ifnull(p, 0), t) DO UPDATE SET b = excluded.b"
            ),
            "INSERT INTO s(p, t) VALUES ($1, $2) ON CONFLICT(team_project, coalesce(p, 0), t) DO UPDATE SET b = excluded.b"
        );
        assert_eq!(
            to_postgres("INSERT INTO m(k) VALUES (?1) ON CONFLICT (k) DO NOTHING"),
            "INSERT INTO m(k) VALUES ($1) ON CONFLICT(team_project, k) DO NOTHING"
        );
        assert_eq!(
            to_postgres("SELECT \"IS ?1\", myifnull(x) FROM t WHERE THIS ?1"),
            "SELECT \"IS ?1\", myifnull(x) FROM t WHERE THIS $1"
        );
        assert_eq!(to_postgres("SELECT 'naïve' || ?1"), "SELECT 'naïve' || $1");
        assert_eq!(
            to_postgres("SELECT id FROM tasks INDEXED BY tasks_ready WHERE instr(l, ?1) > 0"),
            "SELECT id FROM tasks  WHERE strpos(l, $1) > 0"
        );
    }

    #[test]
    fn values_read_back_as_the_types_asked() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB)")
            .unwrap();
        let none: Option<String> = None;
        Sql::execute(
            &conn,
            "INSERT INTO t VALUES (?1, ?2, ?3, ?4), (?5, ?5, ?5, ?5)",
            args![7i64, 0.5, "x", vec![1u8, 2], none],
        )
        .unwrap();
        let rows = conn
            .query("SELECT i, r, s, b FROM t ORDER BY i", &[])
            .unwrap();
        assert_eq!(rows[0].get::<Option<i64>>(0).unwrap(), None);
        assert_eq!(rows[1].get::<i64>(0).unwrap(), 7);
        assert!(rows[1].get::<bool>(0).unwrap());
        assert_eq!(rows[1].get::<f64>(1).unwrap(), 0.5);
        assert_eq!(rows[1].get::<String>(2).unwrap(), "x");
        assert_eq!(rows[1].get::<Vec<u8>>(3).unwrap(), vec![1, 2]);
        assert_eq!(rows[1].get::<String>("S").unwrap(), "x");
        let missing = rows[1].get::<String>("nope").unwrap_err().to_string();
        assert!(missing.contains("no column nope"), "{missing}");
        let err = rows[1].get::<i64>(2).unwrap_err().to_string();
        assert!(
            err.contains("column 2: expected an integer, found text"),
            "{err}"
        );
    }
}
