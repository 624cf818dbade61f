//! The node's bounded history of recent events ([`WatchHub`], fed by the apply observer), which
//! the Watch service (`services::watch`) streams from.

mod hub;

pub use hub::{HistoryGap, WatchHub};
