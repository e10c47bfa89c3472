//! The store against real databases: SQLite files and a private PostgreSQL cluster.

mod concurrency;
mod conformance;
mod crash;
mod fold;
mod locks;
mod open;
mod outage;
mod packed;
mod projections;
mod queue;
mod support;
