//! Server-sent events, read incrementally (the WHATWG `text/event-stream` rules): lines end with
//! `\n`, `\r\n` or `\r`, even when a chunk splits them; `data:` lines of one event join with `\n`;
//! comments (`:` keep-alives) are skipped; a blank line dispatches. It owns the framing only — what
//! an event's data means is the caller's business — and it bounds memory: a line or an event's data
//! over the limit is an error, never an unbounded buffer.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field; `message` when absent (the WHATWG default).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field of this event, if it had one.
    pub id: Option<String>,
}

/// Too much data in one line or one event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an SSE event is larger than the limit of {limit} bytes")]
pub(crate) struct TooLarge {
    /// The limit.
    pub limit: usize,
}

/// The incremental parser: feed it chunks as they arrive. At the end of the stream an event not
/// ended by a blank line is discarded (WHATWG), so a connection cut in the middle of an event never
/// yields half of it.
#[derive(Debug)]
pub(crate) struct SseParser {
    limit: usize,
    /// Bytes of the line not yet ended.
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a `\n` starting the next one belongs to it.
    after_cr: bool,
    /// The first line has not been read yet (a byte-order mark there is skipped).
    at_start: bool,
    event: String,
    data: String,
    has_data: bool,
    id: Option<String>,
}

impl SseParser {
    /// A parser that refuses lines and events larger than `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        SseParser {
            limit,
            line: Vec::new(),
            after_cr: false,
            at_start: true,
            event: String::new(),
            data: String::new(),
            has_data: false,
            id: None,
        }
    }

    /// The events `chunk` completes, in order.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, TooLarge> {
        let mut out = Vec::new();
        for &byte in chunk {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.line_ended(&line)? {
                        out.push(event);
                    }
                }
                _ => {
                    if self.line.len() >= self.limit {
                        return Err(TooLarge { limit: self.limit });
                    }
                    self.line.push(byte);
                }
            }
        }
        Ok(out)
    }

    fn line_ended(&mut self, line: &[u8]) -> Result<Option<SseEvent>, TooLarge> {
        let mut line = String::from_utf8_lossy(line);
        if std::mem::take(&mut self.at_start) {
            if let Some(rest) = line.strip_prefix('\u{feff}') {
                line = rest.to_owned().into();
            }
        }
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.data.len() + value.len() + 1 > self.limit {
                    return Err(TooLarge { limit: self.limit });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = value.to_owned(),
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            _ => {}
        }
        Ok(None)
    }

    /// A blank line: the event read so far, if it has data (an event without data is dropped).
    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        let id = self.id.take();
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data,
            id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new(1024);
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(parser.push(chunk).unwrap());
        }
        out
    }

    fn ev(event: &str, data: &str, id: Option<&str>) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: id.map(Into::into),
        }
    }

    #[test]
    fn data_lines_join_and_comments_are_skipped() {
        let got = all(&[b": keep-alive\n\nid: 7\ndata: {\"a\":\ndata:1}\n\n"]);
        assert_eq!(got, vec![ev("message", "{\"a\":\n1}", Some("7"))]);
    }

    #[test]
    fn events_split_anywhere_across_chunks_and_line_endings_are_read_alike() {
        let text = b"event: error\r\ndata: one\r\n\r\ndata: two\rdata: three\r\rdata:four\n\n";
        let expected = vec![
            ev("error", "one", None),
            ev("message", "two\nthree", None),
            ev("message", "four", None),
        ];
        for split in 0..text.len() {
            let (a, b) = text.split_at(split);
            assert_eq!(all(&[a, b]), expected, "split at {split}");
        }
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(all(&bytes), expected);
    }

    #[test]
    fn an_event_without_its_blank_line_is_not_dispatched() {
        let mut parser = SseParser::new(1024);
        assert!(parser.push(b"data: half").unwrap().is_empty());
        assert!(parser.push(b"\n").unwrap().is_empty());
    }

    #[test]
    fn a_byte_order_mark_and_events_without_data_are_ignored() {
        let got = all(&["\u{feff}data: x\n\nevent: ping\n\n".as_bytes()]);
        assert_eq!(got, vec![ev("message", "x", None)]);
    }

    #[test]
    fn a_line_or_an_event_over_the_limit_is_refused() {
        let mut parser = SseParser::new(16);
        assert_eq!(
            parser.push(&[b'x'; 17]).unwrap_err(),
            TooLarge { limit: 16 }
        );
        let mut parser = SseParser::new(16);
        assert!(parser.push(b"data: 0123456789\n").is_ok());
        assert!(parser.push(b"data: 0123456789\n").is_err());
    }
}
