//! A TCP proxy on loopback that can hold bytes back, for tests of A2A calls between two processes:
//! it passes every byte both ways, except that it can keep an A2A send (`SendMessage`,
//! `message/send`) from reaching the callee, or let it through and keep the callee's response from
//! the caller; it keeps a transcript of what the caller sent on each connection, to tell which
//! requests were made (the `messageId`s sent, the tasks subscribed to). Its upstream can change, so
//! a callee restarted on another port stays behind the same URL.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy holds back.
#[derive(Clone, Copy, PartialEq, Debug, Default)]
pub enum Hold {
    /// Nothing: every byte is passed on.
    #[default]
    Nothing,
    /// A `SendMessage` (`message/send`) request is kept from the callee (never passed on).
    Requests,
    /// A `SendMessage` request is passed on, its response kept from the caller.
    Responses,
}

#[derive(Default)]
struct ProxyState {
    upstream: Mutex<Option<SocketAddr>>,
    hold: Mutex<Hold>,
    /// Sends held back so far (requests or responses).
    held: AtomicUsize,
    /// Each connection's bytes from the caller, as text.
    transcripts: Mutex<Vec<Arc<Mutex<String>>>>,
}

/// A TCP proxy on loopback between a caller and a callee: what the callee's card names as its URL
/// (`--public-url`), so every request of the caller passes here.
pub struct Proxy {
    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub url: String,
    state: Arc<ProxyState>,
}

impl Proxy {
    /// A proxy on a free loopback port, passing everything, with no upstream yet (a connection is
    /// closed at once until [`Proxy::to`] names one).
    pub async fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(ProxyState::default());
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, shared.clone()));
            }
        });
        Proxy { url, state }
    }

    /// Connections from now on go to `upstream`.
    pub fn to(&self, upstream: SocketAddr) {
        *self.state.upstream.lock().unwrap() = Some(upstream);
    }

    /// What to hold back from now on (a send already held stays held: its bytes are dropped).
    pub fn hold(&self, hold: Hold) {
        *self.state.hold.lock().unwrap() = hold;
    }

    /// How many sends were held back so far (their requests or their responses).
    pub fn held(&self) -> usize {
        self.state.held.load(Ordering::SeqCst)
    }

    /// True once the caller asked to follow `task` (its call is journaled: the watcher that
    /// subscribes starts after the callee's task id and the recheck time are durable).
    pub fn subscribed_to(&self, task: &str) -> bool {
        let transcripts = self.state.transcripts.lock().unwrap().clone();
        transcripts.iter().any(|t| {
            let t = t.lock().unwrap();
            t.match_indices("SubscribeToTask")
                .chain(t.match_indices("tasks/resubscribe"))
                .any(|(at, _)| t[at..].contains(task))
        })
    }
}

impl Proxy {
    /// The `messageId` of every `SendMessage` the caller sent, held back or not, in order.
    pub fn sent_message_ids(&self) -> Vec<String> {
        const KEY: &str = "\"messageId\":\"";
        let transcripts = self.state.transcripts.lock().unwrap().clone();
        let mut ids = Vec::new();
        for t in transcripts {
            let t = t.lock().unwrap();
            for (at, _) in t.match_indices("\"SendMessage\"") {
                let rest = &t[at..];
                if let Some(start) = rest.find(KEY).map(|i| i + KEY.len()) {
                    let id: String = rest[start..].chars().take_while(|c| *c != '"').collect();
                    ids.push(id);
                }
            }
        }
        ids
    }
}

/// True when `text` holds a send's method name that ends after byte `seen`: one that the bytes
/// appended since `seen` completed (each send is seen once, also when it straddles two reads).
fn new_send(text: &str, seen: usize) -> bool {
    ["\"SendMessage\"", "\"message/send\""].iter().any(|name| {
        let mut from = seen.saturating_sub(name.len()).min(text.len());
        while !text.is_char_boundary(from) {
            from -= 1;
        }
        text[from..]
            .match_indices(name)
            .any(|(at, _)| from + at + name.len() > seen)
    })
}

/// Pass one connection's bytes both ways, holding back what `Hold` says.
async fn relay(client: TcpStream, state: Arc<ProxyState>) {
    let Some(upstream) = *state.upstream.lock().unwrap() else {
        return;
    };
    let Ok(upstream) = TcpStream::connect(upstream).await else {
        return; // the callee is down: the caller sees the connection closed
    };
    let transcript = Arc::new(Mutex::new(String::new()));
    state.transcripts.lock().unwrap().push(transcript.clone());
    let hold_response = Arc::new(AtomicBool::new(false));
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_upstream, mut to_upstream) = upstream.into_split();
    let up = {
        let (state, hold_response) = (state.clone(), hold_response.clone());
        async move {
            let mut buf = vec![0u8; 64 * 1024];
            let mut holding = false;
            let mut seen = 0;
            loop {
                let n = match from_client.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let send = {
                    let mut t = transcript.lock().unwrap();
                    t.push_str(&String::from_utf8_lossy(&buf[..n]));
                    let send = new_send(&t, seen);
                    seen = t.len();
                    send
                };
                if holding {
                    continue; // held: never passed on
                }
                let hold = *state.hold.lock().unwrap();
                if send && hold == Hold::Requests {
                    holding = true;
                    state.held.fetch_add(1, Ordering::SeqCst);
                    continue;
                }
                if send && hold == Hold::Responses {
                    hold_response.store(true, Ordering::SeqCst);
                }
                if to_upstream.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
            let _ = to_upstream.shutdown().await;
        }
    };
    let down = async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut counted = false;
        loop {
            let n = match from_upstream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if hold_response.load(Ordering::SeqCst) {
                if !counted {
                    counted = true;
                    state.held.fetch_add(1, Ordering::SeqCst);
                }
                continue; // held: the caller never hears it
            }
            if to_client.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = to_client.shutdown().await;
    };
    tokio::join!(up, down);
}
