//! Watches: the node's bounded history of recent events ([`WatchHub`], fed by the apply observer)
//! and the Watch gRPC service that streams it ([`WatchService`]).

mod hub;
mod service;

pub use hub::WatchHub;
pub use service::WatchService;
