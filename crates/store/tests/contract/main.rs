//! The store's behaviour: one contract suite over every back end (memory, SQLite, Postgres),
//! the SQL differential against point `authorize`, and what only databases can show.

mod differential;
mod runs;
mod sql;
mod state;
mod support;
