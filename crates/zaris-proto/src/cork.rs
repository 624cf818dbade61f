//! An HTTP/2 connection's writes held back for one turn of the scheduler, so that the messages
//! that become ready together leave in one write. The server corks its client connections, the
//! client library its connections to the members.
//!
//! When a Raft entry applies, every request it carried is answered at once: up to 64 streams of
//! one HTTP/2 connection get an answer each. Each answer wakes the connection's task, and tokio
//! runs a task woken by the running one next, on the same worker; so the connection task wrote
//! each answer's frame as soon as it was queued, one `writev` per answer, before the next answer
//! was ready (0.72 writes per renewal on the leader with 64 keepalive streams), and the client
//! woke up for each. [`Corked`] takes a connection's writes into a buffer and, the first time
//! that buffer is flushed, wakes its task again instead of writing: the wake puts the task at
//! the back of the worker's run queue, behind the answers' own tasks, which queue their frames
//! meanwhile; the next flush writes them all. This is what grpc-go's writer does (it writes when
//! nothing more is queued). A lone request's answer waits only for the tasks already queued. A
//! client's requests are corked the same way: 64 keepalive streams answered together send their
//! next renewals together.
//!
//! Only small writes are held: a flush with [`HOLD_BELOW_BYTES`] or more waiting writes at once
//! (such a write is worth its system call, and a large answer's frames should not each wait for
//! the run queue). At most [`MAX_WAITING_BYTES`] wait: a write that would make more drains what
//! waits first, so a peer that stops reading holds HTTP/2 back as without the cork, and a write
//! that large goes straight through, uncopied. Bytes still waiting when the connection is dropped
//! (a TLS alert written just before a failed handshake gives up, HTTP/2 closing at once on an
//! error) are written as far as the socket takes them without waiting, as they would have been.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// With fewer bytes than this waiting, a flush is put off once; with more, it writes at once.
pub const HOLD_BELOW_BYTES: usize = 4 * 1024;

/// At most this many bytes wait in a connection's buffer.
pub const MAX_WAITING_BYTES: usize = 16 * 1024;

/// The buffer a drained connection keeps for its next writes; a larger one (after a large
/// answer) is freed, so that idle connections hold little.
const KEPT_CAPACITY_BYTES: usize = 4 * 1024;

/// A socket that can take bytes now, without a task to wake: what a dropped [`Corked`] still
/// writes.
pub trait WriteNow {
    /// Writes what the socket takes of `buf` now; `WouldBlock` if nothing.
    fn write_now(&self, buf: &[u8]) -> io::Result<usize>;
}

impl WriteNow for tokio::net::TcpStream {
    fn write_now(&self, buf: &[u8]) -> io::Result<usize> {
        self.try_write(buf)
    }
}

/// A connection whose small writes wait for the flush after the first, one scheduler turn later.
#[derive(Debug)]
pub struct Corked<IO: WriteNow> {
    io: IO,
    /// Bytes taken from the writer and not yet written to `io`, from `sent` on.
    pending: Vec<u8>,
    sent: usize,
    /// A flush of what is pending was put off once already: the next one writes.
    held: bool,
}

impl<IO: WriteNow> Corked<IO> {
    /// `io`, its writes corked.
    pub fn new(io: IO) -> Self {
        Corked {
            io,
            pending: Vec::new(),
            sent: 0,
            held: false,
        }
    }

    fn waiting(&self) -> usize {
        self.pending.len() - self.sent
    }

    /// Appends `buf` behind what waits, dropping what was written already.
    fn take(&mut self, buf: &[u8]) {
        if self.sent > 0 {
            self.pending.drain(..self.sent);
            self.sent = 0;
        }
        self.pending.extend_from_slice(buf);
    }
}

impl<IO: WriteNow + AsyncWrite + Unpin> Corked<IO> {
    /// Writes what is pending to `io`; ready once nothing is.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.pending.len() {
            let written =
                ready!(Pin::new(&mut self.io).poll_write(cx, &self.pending[self.sent..]))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += written;
        }
        self.pending.clear();
        if self.pending.capacity() > KEPT_CAPACITY_BYTES {
            self.pending = Vec::new();
        }
        self.sent = 0;
        self.held = false;
        Poll::Ready(Ok(()))
    }
}

impl<IO: WriteNow> Drop for Corked<IO> {
    fn drop(&mut self) {
        while self.sent < self.pending.len() {
            match self.io.write_now(&self.pending[self.sent..]) {
                Ok(written) if written > 0 => self.sent += written,
                _ => break,
            }
        }
    }
}

impl<IO: WriteNow + AsyncWrite + Unpin> AsyncWrite for Corked<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.waiting() + buf.len() > MAX_WAITING_BYTES {
            ready!(this.poll_drain(cx))?;
            if buf.len() >= MAX_WAITING_BYTES {
                return Pin::new(&mut this.io).poll_write(cx, buf);
            }
        }
        this.take(buf);
        Poll::Ready(Ok(buf.len()))
    }

    /// All the slices when they fit, as a socket's `writev` takes them: rustls writes its queued
    /// records in one vectored call, and before a failed handshake gives up it makes one call
    /// only, whose second record is the alert that tells the peer why (the first a
    /// ChangeCipherSpec). Otherwise the first slice, through `poll_write`'s bounds.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let total: usize = bufs.iter().map(|buf| buf.len()).sum();
        if this.waiting() + total <= MAX_WAITING_BYTES {
            for buf in bufs {
                this.take(buf);
            }
            return Poll::Ready(Ok(total));
        }
        let first = bufs
            .iter()
            .find(|buf| !buf.is_empty())
            .map_or(&[][..], |buf| &buf[..]);
        Pin::new(this).poll_write(cx, first)
    }

    /// No: h2 then copies DATA payloads under 1 KiB into its own buffer with the other frames
    /// (256 bytes when vectored), instead of holding each aside and flushing before the next
    /// frame, which would put off a flush per answer. A vectored write still works (above).
    fn is_write_vectored(&self) -> bool {
        false
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let waiting = this.waiting();
        if waiting > 0 && waiting < HOLD_BELOW_BYTES && !this.held {
            // Woken from its own poll, a tokio task goes to the back of its worker's run queue
            // (not to the slot that runs next): the tasks queued before it add their frames.
            this.held = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

impl<IO: WriteNow + AsyncRead + Unpin> AsyncRead for Corked<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: WriteNow + Connected> Connected for Corked<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::task::{Wake, Waker};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A socket stand-in that records each write it takes (on a wire the test keeps).
    #[derive(Debug, Default)]
    struct Recorder {
        wire: Arc<Mutex<Vec<Vec<u8>>>>,
        /// At most this many bytes per write (0: no limit).
        max_per_write: usize,
        /// Takes nothing (the peer stopped reading).
        blocked: bool,
        /// Takes this many bytes more, then nothing.
        budget: Option<usize>,
        shut: bool,
    }

    impl Recorder {
        fn writes(&self) -> Vec<Vec<u8>> {
            self.wire.lock().expect("wire").clone()
        }

        fn all(&self) -> Vec<u8> {
            self.writes().concat()
        }

        fn record(&mut self, buf: &[u8]) -> usize {
            let mut n = match self.max_per_write {
                0 => buf.len(),
                max => buf.len().min(max),
            };
            if let Some(budget) = &mut self.budget {
                n = n.min(*budget);
                *budget -= n;
            }
            self.wire.lock().expect("wire").push(buf[..n].to_vec());
            n
        }
    }

    impl WriteNow for Recorder {
        fn write_now(&self, buf: &[u8]) -> io::Result<usize> {
            if self.blocked {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let mut wire = self.wire.lock().expect("wire");
            wire.push(buf.to_vec());
            Ok(buf.len())
        }
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            if this.blocked || this.budget == Some(0) {
                return Poll::Pending;
            }
            Poll::Ready(Ok(this.record(buf)))
        }

        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.get_mut().shut = true;
            Poll::Ready(Ok(()))
        }
    }

    #[derive(Default)]
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn write(corked: &mut Corked<Recorder>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        let mut cx = Context::from_waker(Waker::noop());
        Pin::new(corked).poll_write(&mut cx, bytes)
    }

    fn flush(corked: &mut Corked<Recorder>, waker: &Waker) -> Poll<io::Result<()>> {
        Pin::new(corked).poll_flush(&mut Context::from_waker(waker))
    }

    #[test]
    fn the_first_flush_is_put_off_and_the_next_writes_everything_at_once() {
        let wakes = Arc::new(CountingWaker::default());
        let waker = Waker::from(wakes.clone());
        let mut corked = Corked::new(Recorder::default());
        assert!(matches!(write(&mut corked, b"first"), Poll::Ready(Ok(5))));
        assert!(flush(&mut corked, &waker).is_pending());
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "the task woke itself");
        assert!(corked.io.writes().is_empty(), "nothing written yet");
        // Frames that other tasks queued meanwhile join the same write.
        assert!(matches!(write(&mut corked, b" second"), Poll::Ready(Ok(7))));
        assert!(matches!(flush(&mut corked, &waker), Poll::Ready(Ok(()))));
        assert_eq!(corked.io.writes(), vec![b"first second".to_vec()]);
        // Drained: the next batch is held once again.
        assert!(matches!(write(&mut corked, b"third"), Poll::Ready(Ok(5))));
        assert!(flush(&mut corked, &waker).is_pending());
        assert!(matches!(flush(&mut corked, &waker), Poll::Ready(Ok(()))));
        assert_eq!(corked.io.all(), b"first secondthird");
        assert_eq!(wakes.0.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_flush_with_nothing_pending_is_ready_at_once() {
        let wakes = Arc::new(CountingWaker::default());
        let mut corked = Corked::new(Recorder::default());
        assert!(matches!(
            flush(&mut corked, &Waker::from(wakes.clone())),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_flush_with_enough_waiting_writes_at_once() {
        let wakes = Arc::new(CountingWaker::default());
        let mut corked = Corked::new(Recorder::default());
        let answer = vec![3u8; HOLD_BELOW_BYTES];
        assert!(write(&mut corked, &answer).is_ready());
        assert!(matches!(
            flush(&mut corked, &Waker::from(wakes.clone())),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0, "not held");
        assert_eq!(corked.io.all(), answer);
    }

    #[test]
    fn a_large_write_goes_straight_through_after_what_waits() {
        let mut corked = Corked::new(Recorder::default());
        assert!(write(&mut corked, b"small").is_ready());
        let large = vec![5u8; MAX_WAITING_BYTES];
        assert!(matches!(write(&mut corked, &large), Poll::Ready(Ok(n)) if n == large.len()));
        assert_eq!(
            corked.io.writes(),
            vec![b"small".to_vec(), large],
            "in order, uncopied"
        );
        assert_eq!(corked.waiting(), 0);
        assert!(corked.pending.capacity() <= KEPT_CAPACITY_BYTES);
    }

    #[test]
    fn partial_writes_go_on_where_they_stopped() {
        let mut corked = Corked::new(Recorder {
            max_per_write: 3,
            ..Recorder::default()
        });
        let mut expected = Vec::new();
        for chunk in [&b"abcdefgh"[..], b"ij", b"klmnopq"] {
            assert!(write(&mut corked, chunk).is_ready());
            expected.extend_from_slice(chunk);
        }
        assert!(flush(&mut corked, Waker::noop()).is_pending());
        assert!(matches!(
            flush(&mut corked, Waker::noop()),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(corked.io.all(), expected);
        assert!(corked.io.writes().iter().all(|w| w.len() <= 3));
    }

    #[test]
    fn a_full_buffer_is_drained_before_more_is_taken() {
        let mut corked = Corked::new(Recorder {
            blocked: true,
            ..Recorder::default()
        });
        let most = vec![7u8; MAX_WAITING_BYTES - 2];
        assert!(matches!(write(&mut corked, &most), Poll::Ready(Ok(n)) if n == most.len()));
        // The peer reads nothing: the writer is held back instead of buffering without bound.
        assert!(write(&mut corked, b"more").is_pending());
        assert!(write(&mut corked, b"more").is_pending());
        assert_eq!(corked.waiting(), most.len());
        corked.io.blocked = false;
        assert!(matches!(write(&mut corked, b"more"), Poll::Ready(Ok(4))));
        assert_eq!(corked.io.all(), most, "what was waiting went first");
        assert_eq!(corked.waiting(), 4);
    }

    #[test]
    fn written_bytes_are_let_go_of_before_more_are_taken() {
        let mut corked = Corked::new(Recorder {
            budget: Some(1000),
            ..Recorder::default()
        });
        assert!(write(&mut corked, &[1u8; 3000]).is_ready());
        assert!(flush(&mut corked, Waker::noop()).is_pending(), "held");
        // The peer takes 1,000 bytes, then stops reading: the drain stops part way.
        assert!(flush(&mut corked, Waker::noop()).is_pending());
        assert_eq!(corked.io.all().len(), 1000);
        assert!(write(&mut corked, &[2u8; 500]).is_ready());
        assert_eq!(corked.waiting(), 2500);
        assert_eq!(
            corked.pending.len(),
            2500,
            "the 1,000 written were let go of"
        );
    }

    #[test]
    fn shutdown_writes_what_is_pending_first() {
        let mut corked = Corked::new(Recorder::default());
        assert!(write(&mut corked, b"last words").is_ready());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(matches!(
            Pin::new(&mut corked).poll_shutdown(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(corked.io.all(), b"last words");
        assert!(corked.io.shut);
    }

    #[test]
    fn a_dropped_connection_still_writes_what_waits() {
        let recorder = Recorder::default();
        let wire = recorder.wire.clone();
        let mut corked = Corked::new(recorder);
        assert!(write(&mut corked, b"alert").is_ready());
        drop(corked);
        assert_eq!(wire.lock().expect("wire").concat(), b"alert");
    }

    fn write_vectored(corked: &mut Corked<Recorder>, slices: &[&[u8]]) -> Poll<io::Result<usize>> {
        let bufs: Vec<io::IoSlice<'_>> = slices.iter().map(|s| io::IoSlice::new(s)).collect();
        let mut cx = Context::from_waker(Waker::noop());
        Pin::new(corked).poll_write_vectored(&mut cx, &bufs)
    }

    /// rustls's one write before a failed handshake gives up: a ChangeCipherSpec and the alert
    /// in two slices. Both are taken, and a dropped connection writes both.
    #[test]
    fn a_vectored_write_takes_every_slice() {
        let recorder = Recorder::default();
        let wire = recorder.wire.clone();
        let mut corked = Corked::new(recorder);
        assert!(matches!(
            write_vectored(&mut corked, &[b"ccs", b"", b"alert"]),
            Poll::Ready(Ok(8))
        ));
        drop(corked);
        assert_eq!(wire.lock().expect("wire").concat(), b"ccsalert");
    }

    #[test]
    fn a_vectored_write_that_would_overfill_goes_a_slice_at_a_time() {
        let mut corked = Corked::new(Recorder::default());
        let half = vec![1u8; MAX_WAITING_BYTES / 2 + 1];
        assert!(matches!(
            write_vectored(&mut corked, &[b"", &half, &half]),
            Poll::Ready(Ok(n)) if n == half.len()
        ));
        assert_eq!(corked.waiting(), half.len(), "the first slice, waiting");
        // What waits plus the slices would pass the bound: the first slice goes (through the
        // drain), and the caller comes back with the rest.
        assert!(matches!(
            write_vectored(&mut corked, &[b"ab", &half]),
            Poll::Ready(Ok(2))
        ));
        assert_eq!(corked.waiting(), half.len() + 2);
        assert!(matches!(
            write_vectored(&mut corked, &[]),
            Poll::Ready(Ok(0))
        ));
    }

    #[test]
    fn a_drained_connection_keeps_a_small_buffer_only() {
        let mut corked = Corked::new(Recorder::default());
        assert!(write(&mut corked, &vec![1u8; MAX_WAITING_BYTES / 2]).is_ready());
        assert!(flush(&mut corked, Waker::noop()).is_ready());
        assert!(corked.pending.capacity() <= KEPT_CAPACITY_BYTES);
    }

    /// Over a real socket, a writer that flushes as usual (`AsyncWriteExt::flush` polls until
    /// ready) gets its bytes through, in order, and never hangs on the put-off flush.
    #[tokio::test]
    async fn bytes_cross_a_real_socket_in_order() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let writer = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.expect("accept");
            let mut corked = Corked::new(socket);
            for i in 0..100u32 {
                corked.write_all(&i.to_be_bytes()).await.expect("write");
                if i % 7 == 0 {
                    corked.flush().await.expect("flush");
                }
            }
            corked
                .write_all(&vec![9u8; 3 * MAX_WAITING_BYTES])
                .await
                .expect("write");
            corked.write_all(b"tail").await.expect("write");
            corked.shutdown().await.expect("shutdown");
        });
        let mut reader = tokio::net::TcpStream::connect(address)
            .await
            .expect("connect");
        let mut received = Vec::new();
        reader.read_to_end(&mut received).await.expect("read");
        writer.await.expect("writer");
        let mut expected: Vec<u8> = (0..100u32).flat_map(u32::to_be_bytes).collect();
        expected.extend(vec![9u8; 3 * MAX_WAITING_BYTES]);
        expected.extend_from_slice(b"tail");
        assert_eq!(received, expected);
    }
}
