//! A clear answer to a plaintext client on a TLS port.
//!
//! Without it, such a client gets whatever its HTTP/2 stack makes of a TLS alert: "frame with
//! invalid size", or only "broken pipe" when the close races its writes, which it must treat as
//! indeterminate. A TLS connection starts with a handshake record (byte 0x16); a plaintext one
//! with the HTTP/2 preface (`PRI * HTTP/2.0`) or an HTTP/1 request line. Those get an answer in
//! their own protocol that says what is wrong: an HTTP/2 GOAWAY (INADEQUATE_SECURITY, last
//! stream 0: nothing was processed) or an HTTP/1 400, both carrying [`PLAINTEXT_REFUSED`].

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

pub use zaris_proto::error::PLAINTEXT_REFUSED;

const HTTP2_PREFACE_START: &[u8; 4] = b"PRI ";
/// How long to wait for a refused client to read the answer and hang up, so that closing with
/// its unread request in our buffer does not reset the connection before the answer arrives.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);
const DRAIN_MAX_BYTES: usize = 64 * 1024;
/// How long to wait for an HTTP/2 client's first request before answering anyway.
const FIRST_STREAM_WAIT: Duration = Duration::from_millis(500);
/// The HTTP/2 connection preface a client sends first.
const HTTP2_PREFACE_LEN: usize = 24;
/// Frames larger than this are not read through: answer at once.
const MAX_FRAME_SKIPPED: usize = 64 * 1024;

/// Reads the client's preface and frames up to its first HEADERS frame (a request).
async fn first_stream(socket: &mut TcpStream) -> std::io::Result<()> {
    const HEADERS: u8 = 0x1;
    let mut preface = [0u8; HTTP2_PREFACE_LEN];
    socket.read_exact(&mut preface).await?;
    let mut payload = Vec::new();
    loop {
        let mut header = [0u8; 9];
        socket.read_exact(&mut header).await?;
        if header[3] == HEADERS {
            return Ok(());
        }
        let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        if len > MAX_FRAME_SKIPPED {
            return Ok(());
        }
        payload.resize(len, 0);
        socket.read_exact(&mut payload).await?;
    }
}

/// What the first bytes of a connection say it speaks.
#[derive(Debug, PartialEq, Eq)]
enum Opening {
    Tls,
    Http2,
    Http1,
}

fn classify(first: &[u8]) -> Option<Opening> {
    match first {
        [] => None,
        [0x16, ..] => Some(Opening::Tls),
        start if start.len() >= 4 && start[..4] == HTTP2_PREFACE_START[..] => Some(Opening::Http2),
        start if start.len() >= 4 => {
            let method = start[..4]
                .iter()
                .all(|b| b.is_ascii_uppercase() || *b == b' ');
            Some(if method { Opening::Http1 } else { Opening::Tls })
        }
        // Too few bytes to tell a plaintext request from something else yet.
        [b, ..] if b.is_ascii_uppercase() => None,
        _ => Some(Opening::Tls),
    }
}

/// What [`refuse`] made of a connection's first bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Greeting {
    /// Closed before its first byte: a TCP probe (a follower checking whether a silent leader
    /// still listens, `dead_leader.rs`; a load balancer's health check), not a failed handshake.
    Closed,
    /// A plaintext client, answered in its own protocol and closed.
    Refused,
    /// Left unread for the TLS acceptor: a TLS handshake, or bytes that are neither (the
    /// acceptor refuses what is not TLS in its own way), or a connection that failed.
    Other,
}

/// Answers and closes a plaintext connection (see [`Greeting`]). The caller bounds the wait for
/// the first bytes.
pub async fn refuse(socket: &mut TcpStream, listener: &str) -> Greeting {
    let mut first = [0u8; 4];
    let opening = loop {
        let Ok(n) = socket.peek(&mut first).await else {
            return Greeting::Other;
        };
        if n == 0 {
            return Greeting::Closed;
        }
        if let Some(opening) = classify(&first[..n]) {
            break opening;
        }
        // A request line arrives in pieces only from a very slow client: look again shortly.
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let answer = match opening {
        Opening::Tls => return Greeting::Other,
        Opening::Http2 => {
            // Answered once the client has opened its first stream: a GOAWAY before that can
            // find the request still queued in the client, which then only learns "connection
            // closed" and cannot tell whether it was sent.
            let _ = tokio::time::timeout(FIRST_STREAM_WAIT, first_stream(socket)).await;
            http2_goaway(listener)
        }
        Opening::Http1 => http1_bad_request(listener),
    };
    if socket.write_all(&answer).await.is_ok() && socket.shutdown().await.is_ok() {
        let mut sink = vec![0u8; 4096];
        let mut drained = 0;
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, async {
            while drained < DRAIN_MAX_BYTES {
                match socket.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => drained += n,
                }
            }
        })
        .await;
    }
    Greeting::Refused
}

fn message(listener: &str) -> String {
    format!(
        "zaris: {PLAINTEXT_REFUSED} (the {listener} listener): connect with TLS, e.g. zaris \
         --cacert FILE (or ZARIS_CACERT)"
    )
}

/// The server's SETTINGS (its connection preface) and a GOAWAY: INADEQUATE_SECURITY, last
/// stream 0, with the message as debug data.
fn http2_goaway(listener: &str) -> Vec<u8> {
    const SETTINGS: u8 = 0x4;
    const GOAWAY: u8 = 0x7;
    const INADEQUATE_SECURITY: u32 = 0xc;
    let frame = |kind: u8, payload: &[u8]| {
        let len = (payload.len() as u32).to_be_bytes();
        let mut frame = vec![len[1], len[2], len[3], kind, 0, 0, 0, 0, 0];
        frame.extend_from_slice(payload);
        frame
    };
    let mut goaway = 0u32.to_be_bytes().to_vec();
    goaway.extend_from_slice(&INADEQUATE_SECURITY.to_be_bytes());
    goaway.extend_from_slice(message(listener).as_bytes());
    let mut answer = frame(SETTINGS, &[]);
    answer.extend(frame(GOAWAY, &goaway));
    answer
}

fn http1_bad_request(listener: &str) -> Vec<u8> {
    let body = message(listener) + "\n";
    format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection closed before its first byte is a probe; a plaintext request is refused;
    /// a TLS handshake is left for the acceptor.
    #[tokio::test]
    async fn a_connection_closed_before_its_first_byte_is_a_probe() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        for (sent, expected) in [
            (&b""[..], Greeting::Closed),
            (&b"GET / HTTP/1.1\r\n\r\n"[..], Greeting::Refused),
            (&[0x16, 0x03, 0x01, 0x00][..], Greeting::Other),
        ] {
            let mut client = TcpStream::connect(addr).await.expect("connect");
            client.write_all(sent).await.expect("write");
            client.shutdown().await.expect("shutdown");
            let (mut accepted, _) = listener.accept().await.expect("accept");
            assert_eq!(refuse(&mut accepted, "client").await, expected, "{sent:?}");
        }
    }

    #[test]
    fn openings_are_told_apart() {
        assert_eq!(classify(&[0x16, 3, 1, 0]), Some(Opening::Tls));
        assert_eq!(classify(&[0x16]), Some(Opening::Tls));
        assert_eq!(classify(b"PRI "), Some(Opening::Http2));
        assert_eq!(classify(b"POST"), Some(Opening::Http1));
        assert_eq!(classify(b"GET "), Some(Opening::Http1));
        assert_eq!(classify(b"PR"), None);
        assert_eq!(classify(&[0, 1, 2, 3]), Some(Opening::Tls));
        assert_eq!(classify(b"P\x00ab"), Some(Opening::Tls));
        assert_eq!(classify(&[]), None);
    }

    #[test]
    fn the_goaway_is_a_well_formed_frame_after_empty_settings() {
        let answer = http2_goaway("client");
        assert_eq!(&answer[..9], &[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        let goaway = &answer[9..];
        let len = u32::from_be_bytes([0, goaway[0], goaway[1], goaway[2]]) as usize;
        assert_eq!(goaway[3], 7);
        assert_eq!(goaway.len(), 9 + len);
        assert_eq!(&goaway[9..17], &[0, 0, 0, 0, 0, 0, 0, 0xc]);
        assert!(
            String::from_utf8_lossy(&goaway[17..]).contains(PLAINTEXT_REFUSED),
            "{goaway:?}"
        );
    }
}
