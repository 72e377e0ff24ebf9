//! Accepted TCP connections: the connection limit, the header-read and idle timeouts, and the answer
//! on a connection over the limit. It serves each connection with hyper's HTTP/1.1 server and the
//! axum router (or, for a connection that opens with the HTTP/2 preface, hyper's HTTP/2 server:
//! gRPC); it never reads what a request asks, nor touches the engine or the store. Every
//! connection holds a file descriptor, so the limit is what keeps the store's descriptors free
//! whatever clients do.
//!
//! The timeouts are kept here rather than by hyper's `header_read_timeout`: hyper starts that clock
//! as soon as a connection waits for a request head, so it would also close every idle keep-alive
//! connection after the (short) header timeout. Here a head's clock starts with its first byte (or
//! with the connection, for its first request) and an idle connection has its own, longer one. A
//! request's body gets the header timeout too, from the end of its head, so that a body trickled a
//! byte at a time cannot hold a connection either.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Request, Response};
use axum::Router;
use http_body::{Body as _, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use super::jsonrpc;

/// Connections over the limit answered at once; more are closed without an answer, so that a flood
/// of refusals holds no more descriptors than this.
const REFUSALS: usize = 64;
/// The longest a refused connection is kept to deliver its answer.
const REFUSAL_TIME: Duration = Duration::from_secs(1);
/// The pause after an accept that failed (out of file descriptors): no busy loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What the accept loop needs from `ServerConfig`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
}

/// The most a connection buffers (hyper's read and write buffers; its minimum is 8 KiB).
const CONNECTION_BUFFER: usize = 16 * 1024;

/// How often an HTTP/2 connection is pinged, and how long a ping may go unanswered before the
/// connection is closed.
const H2_KEEP_ALIVE: Duration = Duration::from_secs(20);

/// Most streams (requests) in flight on one HTTP/2 connection.
const H2_MAX_STREAMS: u32 = 64;

/// Accept connections on `listener` and serve each with `router`, within `limits`, until the
/// future is dropped (which closes every connection it serves).
pub(crate) async fn accept_loop(
    listener: TcpListener,
    router: Router,
    limits: Limits,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(REFUSALS));
    let mut connections = tokio::task::JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // The peer gave up before we accepted: nothing to retry.
            Err(e) if per_connection(&e) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection failed; retrying shortly");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        if let Ok(permit) = permits.clone().try_acquire_owned() {
            let router = router.clone();
            connections.spawn(async move {
                serve_connection(stream, router, limits).await;
                drop(permit);
            });
        } else if let Ok(permit) = refusals.clone().try_acquire_owned() {
            connections.spawn(async move {
                refuse(stream, limits.max_connections).await;
                drop(permit);
            });
        } else {
            drop(stream);
        }
    }
}

fn per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Answer a connection over the limit: HTTP 503 with the JSON-RPC error -32051, then close.
async fn refuse(mut stream: TcpStream, limit: usize) {
    let body = jsonrpc::too_many_connections(limit).to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let answered = tokio::time::timeout(REFUSAL_TIME, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        // Read what the client sends until it closes: closing with unread bytes would reset the
        // connection, and the client could lose the answer.
        let mut sink = [0u8; 1024];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, io::Error>(())
    })
    .await;
    if let Ok(Err(e)) = answered {
        tracing::debug!(error = %e, "answering a connection over the limit failed");
    }
}

/// The first bytes of every HTTP/2 connection without TLS ("prior knowledge", as gRPC clients
/// open one): what tells a gRPC client from an HTTP/1.1 one on the same port.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether the connection opens with the HTTP/2 preface (read without consuming it). A connection
/// that closes, or whose first bytes differ, is HTTP/1.1's to answer.
async fn opens_http2(stream: &TcpStream) -> io::Result<bool> {
    let mut first = [0u8; H2_PREFACE.len()];
    loop {
        let n = stream.peek(&mut first).await?;
        if n == 0 || !H2_PREFACE.starts_with(&first[..n]) {
            return Ok(false);
        }
        if n == H2_PREFACE.len() {
            return Ok(true);
        }
        // Part of the preface: the socket stays readable, so wait for the rest without spinning.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Serve one connection until it ends, or until a head or an idle wait outlasts its timeout. A
/// connection that opens with the HTTP/2 preface is served with HTTP/2 (gRPC), any other with
/// HTTP/1.1; both within the same limits.
async fn serve_connection(stream: TcpStream, router: Router, limits: Limits) {
    // The first request's head clock starts with the connection, its first bytes included.
    let opened = Instant::now();
    let http2 = match tokio::time::timeout(limits.header_timeout, opens_http2(&stream)).await {
        Ok(Ok(http2)) => http2,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "connection ended before its first request");
            return;
        }
        Err(_) => {
            tracing::debug!("closing a connection that sent no complete request in time");
            return;
        }
    };
    if http2 {
        // HTTP/2 writes a response as several frames (headers, data, gRPC's trailers); with Nagle's
        // algorithm the later ones wait for the client's delayed ACK, some 40 ms a call.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
    }
    let activity = Arc::new(Activity::new(http2, opened));
    let io = TokioIo::new(Watched {
        stream,
        activity: activity.clone(),
    });
    let service = Tracked {
        inner: TowerToHyperService::new(router),
        activity: activity.clone(),
    };
    if http2 {
        let mut builder =
            hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
        // What one stream may buffer, as for HTTP/1.1 below.
        builder.max_send_buf_size(CONNECTION_BUFFER);
        // A stream waiting on a quiet task writes nothing, so a peer that vanished without a FIN
        // (a NAT that forgot the connection) would hold its stream slot for as long as the task
        // waits: HTTP/2 PINGs find it and close the connection (SSE has its keep-alive comments).
        // Streams per connection are bounded too, so one connection cannot multiply the
        // connection limit by hyper's default of 200.
        builder
            .timer(hyper_util::rt::TokioTimer::new())
            .keep_alive_interval(Some(H2_KEEP_ALIVE))
            .keep_alive_timeout(H2_KEEP_ALIVE)
            .max_concurrent_streams(H2_MAX_STREAMS);
        let conn = builder.serve_connection(io, service);
        tokio::pin!(conn);
        if watch(conn.as_mut(), &activity, limits).await == Stopped::TimedOut {
            // Say goodbye (GOAWAY), so that a client does not send its next call into a connection
            // that is closing, then close; a stream that would hold it is cut after `GOODBYE`.
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(GOODBYE, conn).await;
        }
        return;
    }
    let mut builder = hyper::server::conn::http1::Builder::new();
    // What one connection may buffer: a client that never reads a stream holds at most this much of
    // it in the server (then the stream waits for TCP), not hyper's default of about 400 KB.
    builder
        .keep_alive(true)
        .header_read_timeout(None)
        .max_buf_size(CONNECTION_BUFFER);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    // A connection that timed out is dropped, which closes it: no request is in flight, and one
    // whose head trickles must not be waited for.
    watch(conn.as_mut(), &activity, limits).await;
}

/// How a watched connection stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    /// It ended (closed by the client, or after an error).
    Ended,
    /// Its running timeout expired: no request is in flight, or the one whose body is still being
    /// read took too long.
    TimedOut,
}

/// The longest an HTTP/2 connection that timed out is kept after its GOAWAY.
const GOODBYE: Duration = Duration::from_secs(1);

/// Drive a connection until it ends or its running timeout expires.
async fn watch<C>(mut conn: Pin<&mut C>, activity: &Activity, limits: Limits) -> Stopped
where
    C: Future<Output = Result<(), hyper::Error>>,
{
    loop {
        let deadline = activity.deadline(limits);
        let changed = activity.changed.notified();
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return Stopped::Ended;
            }
            () = sleep_until(deadline) => {
                if activity.deadline(limits).is_some_and(|d| d <= Instant::now()) {
                    tracing::debug!("closing a connection that sent no complete request in time");
                    return Stopped::TimedOut;
                }
            }
            () = changed => {}
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Where a connection is between requests, which says which timeout runs.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for a request head that started (or a first request, from the opening) at `since`.
    Head { since: Instant },
    /// No request in flight and no byte of the next one since `since`.
    Idle { since: Instant },
    /// Requests in flight (their responses not all sent): no timeout runs, unless a request's body
    /// is still being read, since `body_since` (the end of its head).
    Busy {
        requests: usize,
        body_since: Option<Instant>,
    },
}

/// A connection's phase, shared by its reads, its requests and its watchdog.
struct Activity {
    phase: Mutex<Phase>,
    /// An HTTP/2 connection: its frames between requests (window updates, pings, settings) start no
    /// request head, so only requests end its idle wait; its first request still has the header
    /// timeout from the opening.
    http2: bool,
    /// Signalled when a timeout starts, so the watchdog takes up the new deadline.
    changed: Notify,
}

impl Activity {
    fn new(http2: bool, opened: Instant) -> Self {
        Activity {
            http2,
            phase: Mutex::new(Phase::Head { since: opened }),
            changed: Notify::new(),
        }
    }

    fn update<T>(&self, f: impl FnOnce(&mut Phase) -> T) -> T {
        f(&mut self.phase.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// When the running timeout expires; `None` with a request in flight.
    fn deadline(&self, limits: Limits) -> Option<Instant> {
        match self.update(|p| *p) {
            Phase::Head { since } => Some(since + limits.header_timeout),
            Phase::Idle { since } => Some(since + limits.idle_timeout),
            Phase::Busy { body_since, .. } => body_since.map(|s| s + limits.header_timeout),
        }
    }

    /// Bytes arrived: on an idle connection they start a request head.
    fn read(&self) {
        if self.http2 {
            return;
        }
        let started = self.update(|p| match *p {
            Phase::Idle { .. } => {
                *p = Phase::Head {
                    since: Instant::now(),
                };
                true
            }
            _ => false,
        });
        if started {
            self.changed.notify_one();
        }
    }

    /// A request's head was read: it is in flight until its response is sent or dropped, and its
    /// body (unless it has none) is being read.
    fn begin(self: &Arc<Self>, body: bool) -> InFlight {
        let body_since = body.then(Instant::now);
        self.update(|p| {
            *p = match *p {
                Phase::Busy { requests, .. } => Phase::Busy {
                    requests: requests + 1,
                    body_since,
                },
                _ => Phase::Busy {
                    requests: 1,
                    body_since,
                },
            }
        });
        self.changed.notify_one();
        InFlight(self.clone())
    }

    /// A request's body was read (or dropped): its clock stops.
    fn body_read(&self) {
        self.update(|p| {
            if let Phase::Busy { body_since, .. } = p {
                *body_since = None;
            }
        });
    }
}

/// A request in flight; dropped with its response body (sent, or its connection gone).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let idle = self.0.update(|p| match *p {
            Phase::Busy {
                requests,
                body_since,
            } if requests > 1 => {
                *p = Phase::Busy {
                    requests: requests - 1,
                    body_since,
                };
                false
            }
            _ => {
                *p = Phase::Idle {
                    since: Instant::now(),
                };
                true
            }
        });
        if idle {
            self.0.changed.notify_one();
        }
    }
}

/// The socket, telling the connection's [`Activity`] when bytes arrive.
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// The router as a hyper service whose requests' bodies run the header clock and whose responses
/// keep their request in flight until sent.
struct Tracked {
    inner: TowerToHyperService<Router>,
    activity: Arc<Activity>,
}

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Response<Guarded>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.begin(!request.body().is_end_stream());
        let activity = self.activity.clone();
        let request = request.map(|body| Upload {
            body,
            activity,
            done: false,
        });
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| Guarded {
                body,
                _in_flight: in_flight,
            }))
        })
    }
}

/// A request body that stops its clock when it is read to the end or dropped.
struct Upload {
    body: Incoming,
    activity: Arc<Activity>,
    done: bool,
}

impl Upload {
    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            self.activity.body_read();
        }
    }
}

impl http_body::Body for Upload {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) || this.body.is_end_stream() {
            this.finish();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A response body that holds its request in flight.
struct Guarded {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
