//! [`KeepAliveStream`]: a KeepAlive stream the caller drives, for programs that manage many
//! leases themselves (load generators, proxies holding leases for others). Most programs want
//! [`Lease`](crate::Lease) handles instead, which renew in the background and track each lease's
//! safe deadline.

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};
use zaris_proto::v1::{LeaseKeepAliveRequest, LeaseKeepAliveResponse};
use zaris_types::LeaseId;

use crate::client::Client;
use crate::client::lease_service;
use crate::error::{Error, RpcError};
use crate::lease::Renewal;

/// Requests that may be sent on one stream before their answers are read.
const OUTBOUND_BUFFER: usize = 1_024;

/// One KeepAlive stream to the Raft leader. Send renewals with [`KeepAliveStream::send`] (many
/// leases per message, many messages in flight) and read the answers, in the order sent, with
/// [`KeepAliveStream::next`]. Each answer comes after its renewal committed.
///
/// The stream does not follow a leader change: once an error is returned (NOT_LEADER, the
/// connection lost, ...) it is finished; open another with [`Client::keep_alive_stream`]. A
/// renewal whose answer was not read is indeterminate, and renewing again is harmless.
#[derive(Debug)]
pub struct KeepAliveStream {
    client: Client,
    endpoint: String,
    outbound: mpsc::Sender<LeaseKeepAliveRequest>,
    inbound: Streaming<LeaseKeepAliveResponse>,
    failed: bool,
    /// Renewals sent whose answer has not been read: `next` with none would wait forever.
    outstanding: usize,
}

impl Client {
    /// Opens a [`KeepAliveStream`] on the Raft leader (found first, following redirects).
    pub async fn keep_alive_stream(&self) -> Result<KeepAliveStream, Error> {
        let leader = self.leader().await?;
        let target = self.endpoints_ref().pick();
        let endpoint = target.authority.clone();
        tracing::debug!(raft_leader = leader.id, %endpoint, "opening a keepalive stream");
        let (outbound, receiver) = mpsc::channel(OUTBOUND_BUFFER);
        let timeout = self.options().attempt_timeout();
        let mut service = lease_service(target.channel);
        let mut request = tonic::Request::new(ReceiverStream::new(receiver));
        self.authorize(&mut request);
        let opening = service.keep_alive(request);
        let inbound = match tokio::time::timeout(timeout, opening).await {
            Ok(Ok(response)) => response.into_inner(),
            Ok(Err(status)) => return Err(RpcError::from_status(&status, endpoint).into()),
            Err(_elapsed) => return Err(RpcError::timed_out(timeout, endpoint).into()),
        };
        Ok(KeepAliveStream {
            client: self.clone(),
            endpoint,
            outbound,
            inbound,
            failed: false,
            outstanding: 0,
        })
    }
}

impl KeepAliveStream {
    /// Sends one renewal of `ids` and returns its `seq`, which the answer carries
    /// ([`Renewal::seq`]). Waits only if [`OUTBOUND_BUFFER`] requests are unread by the server.
    pub async fn send(&mut self, ids: impl IntoIterator<Item = LeaseId>) -> Result<u64, Error> {
        self.check_open()?;
        let seq = self.client.next_keepalive_seq();
        let request = LeaseKeepAliveRequest {
            ids: ids.into_iter().map(LeaseId::get).collect(),
            seq,
        };
        if self.outbound.send(request).await.is_err() {
            return Err(self.ended());
        }
        self.outstanding += 1;
        Ok(seq)
    }

    /// The next answer, in the order the renewals were sent. With no renewal waiting for an
    /// answer this is an error at once, not a wait that never ends.
    pub async fn next(&mut self) -> Result<Renewal, Error> {
        self.check_open()?;
        if self.outstanding == 0 {
            return Err(Error::InvalidArgument {
                reason: "no renewal sent on this keepalive stream is waiting for an answer".into(),
            });
        }
        match self.inbound.message().await {
            Ok(Some(response)) => {
                self.outstanding -= 1;
                Ok(Renewal::from(response))
            }
            Ok(None) => Err(self.ended()),
            Err(status) => {
                self.failed = true;
                Err(RpcError::from_status(&status, self.endpoint.clone()).into())
            }
        }
    }

    /// The member ("host:port") the stream is open to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn check_open(&self) -> Result<(), Error> {
        if self.failed {
            return Err(Error::InvalidArgument {
                reason: "the keepalive stream has failed; open a new one".to_owned(),
            });
        }
        Ok(())
    }

    fn ended(&mut self) -> Error {
        self.failed = true;
        RpcError::from_status(
            &Status::unavailable("the KeepAlive stream was closed by the server"),
            self.endpoint.clone(),
        )
        .into()
    }
}
