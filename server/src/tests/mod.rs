//! Tests of a whole server started in-process: fail-closed behaviour, shared frame bodies and
//! slow clients, over real sockets.

mod fail_closed;
mod feed_order;
mod group_commit;
mod shared_body;
mod slow_client;
mod watch_report;
