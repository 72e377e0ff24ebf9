//! Row bodies as the SQLite store keeps them: JSON text, or, when that saves space, the JSON
//! compressed as one zstd frame in a BLOB. Journal rows, history messages and artifacts are
//! written through [`pack`] and read through [`unpacked`]; the value's own type (TEXT or BLOB) says
//! which it is, so rows written before compression (schema migration 11) read as they always did.
//!
//! Why: a task at rest is its rows, and JSON repeats itself (keys, ids, a skill's state in both
//! the transition and the next visit). zstd at level 1 halves a journal row (measured on the
//! research loop's and `bench idle`'s journals: 48% and 58% of their size; LZ4 64% and 76%) for a
//! couple of microseconds per row, on the caller's thread, not the writer's. Once the file has a
//! dictionary trained on its own bodies ([`super::dictionary`]), frames are compressed with it
//! and name it in their header.

use std::cell::RefCell;

use rusqlite::types::{ToSqlOutput, ValueRef};
use zstd::zstd_safe::{CCtx, DCtx};

use super::dictionary::{Dictionaries, Encoder};
use crate::store::{Encoded, StoreError};

/// Bodies shorter than this stay text: a frame's header and a short body's literals cost about
/// what compression saves on them.
pub(super) const MIN_PACKED: usize = 128;

/// zstd's fastest standard level; on journal rows it compresses as well as level 3 does.
pub(super) const LEVEL: i32 = 1;

/// The most a frame may say it holds: SQLite's own limit on one value (`SQLITE_MAX_LENGTH`). A
/// larger claim is a corrupt row, refused before anything is allocated for it.
const MAX_BODY: u64 = 1_000_000_000;

/// An append's bodies compressed where that pays, on the caller's thread: its journal row's, then
/// its history messages' and artifact pieces' in [`crate::store::view::EncodedView`]'s order. `None` stores the text.
#[derive(Debug, Default)]
pub(crate) struct Packed {
    body: Option<Vec<u8>>,
    history: Vec<Option<Vec<u8>>>,
    artifacts: Vec<Option<Vec<u8>>>,
}

impl Packed {
    /// Compress what pays in `encoded`, with the file's newest dictionary if it has one.
    pub fn new(encoded: &Encoded, dictionaries: &Dictionaries) -> Self {
        let encoder = dictionaries.encoder();
        let pack = |json: &str| pack(json, encoder.as_deref());
        Packed {
            body: pack(&encoded.body),
            history: encoded.view.history.iter().map(|(_, m)| pack(m)).collect(),
            artifacts: encoded.view.artifacts.iter().map(|a| pack(&a.3)).collect(),
        }
    }

    /// The journal row's body as bound.
    pub fn body<'a>(&'a self, text: &'a str) -> ToSqlOutput<'a> {
        stored(text, self.body.as_deref())
    }

    /// History message `i`'s body as bound.
    pub fn history<'a>(&'a self, i: usize, text: &'a str) -> ToSqlOutput<'a> {
        stored(text, self.history.get(i).and_then(Option::as_deref))
    }

    /// Artifact piece `i`'s body as bound.
    pub fn artifact<'a>(&'a self, i: usize, text: &'a str) -> ToSqlOutput<'a> {
        stored(text, self.artifacts.get(i).and_then(Option::as_deref))
    }
}

/// A body as bound: its frame as a BLOB when it has one, else its text.
fn stored<'a>(text: &'a str, frame: Option<&'a [u8]>) -> ToSqlOutput<'a> {
    ToSqlOutput::Borrowed(match frame {
        Some(frame) => ValueRef::Blob(frame),
        None => ValueRef::Text(text.as_bytes()),
    })
}

thread_local! {
    /// Each thread's compression context, made once (a context is a few hundred KB to set up).
    static COMPRESSOR: RefCell<Option<CCtx<'static>>> = const { RefCell::new(None) };
    /// Each thread's decompression context.
    static DECOMPRESSOR: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// `json` compressed (with `encoder`'s dictionary, if given), when it is long enough and
/// compression makes it smaller (`None`: store it as it is). Compression never fails a write: if
/// zstd refuses, the text is stored.
pub(crate) fn pack(json: &str, encoder: Option<&Encoder>) -> Option<Vec<u8>> {
    if json.len() < MIN_PACKED {
        return None;
    }
    let mut frame = Vec::with_capacity(zstd::zstd_safe::compress_bound(json.len()));
    COMPRESSOR.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        let cctx = match &mut *slot {
            Some(cctx) => cctx,
            empty => empty.insert(CCtx::try_create()?),
        };
        // Both write the content size in the frame's header (readers check it); with a
        // dictionary, its id too.
        match encoder {
            Some(encoder) => cctx.compress_using_cdict(&mut frame, json.as_bytes(), &encoder.cdict),
            None => cctx.compress(&mut frame, json.as_bytes(), LEVEL),
        }
        .ok()
    })?;
    (frame.len() < json.len()).then_some(frame)
}

/// The JSON text of a stored body, given to `read` (borrowed from SQLite's buffer when the body is
/// text, decompressed when it is a frame). A body that is neither UTF-8 text nor a whole frame
/// of UTF-8 (or names a dictionary neither in `dictionaries` nor in the file `conn` reads) is
/// `Err(reason)`, for the caller to name the row.
pub(crate) fn unpacked<R>(
    value: ValueRef<'_>,
    dictionaries: &Dictionaries,
    conn: &rusqlite::Connection,
    read: impl FnOnce(&str) -> Result<R, StoreError>,
) -> Result<Result<R, StoreError>, String> {
    match value {
        ValueRef::Text(bytes) => {
            let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
            Ok(read(text))
        }
        ValueRef::Blob(frame) => {
            let bytes = decompress(frame, dictionaries, conn)?;
            let text = std::str::from_utf8(&bytes).map_err(|e| e.to_string())?;
            Ok(read(text))
        }
        other => Err(format!(
            "a body is text or a zstd frame, not {}",
            other.data_type()
        )),
    }
}

/// A frame's content, checked against the size its header claims before allocating it, and
/// decompressed with the dictionary it names, if it names one.
fn decompress(
    frame: &[u8],
    dictionaries: &Dictionaries,
    conn: &rusqlite::Connection,
) -> Result<Vec<u8>, String> {
    let size = match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(size)) if size <= MAX_BODY => size,
        Ok(Some(size)) => return Err(format!("a zstd frame claims {size} bytes")),
        Ok(None) | Err(_) => return Err("not a zstd frame with its content size".into()),
    };
    let ddict = match zstd::zstd_safe::get_dict_id_from_frame(frame) {
        None => None,
        Some(id) => Some(dictionaries.decoder_from(id.get(), conn)?),
    };
    let mut out = Vec::with_capacity(usize::try_from(size).map_err(|e| e.to_string())?);
    let mut with_context = |dctx: &mut DCtx<'static>| {
        match &ddict {
            Some(ddict) => dctx.decompress_using_ddict(&mut out, frame, ddict),
            None => dctx.decompress(&mut out, frame),
        }
        .map_err(|code| zstd::zstd_safe::get_error_name(code).to_owned())
    };
    DECOMPRESSOR.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => match &mut *slot {
            Some(dctx) => with_context(dctx),
            empty => with_context(empty.insert(DCtx::try_create().ok_or("no zstd context")?)),
        },
        // Re-entered on this thread (a reader inside a reader): a context of its own.
        Err(_) => with_context(&mut DCtx::try_create().ok_or("no zstd context")?),
    })?;
    if out.len() as u64 != size {
        return Err(format!(
            "a zstd frame claims {size} bytes and holds {}",
            out.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_back(text: &str, frame: Option<&[u8]>) -> Result<String, String> {
        let value = match frame {
            Some(frame) => ValueRef::Blob(frame),
            None => ValueRef::Text(text.as_bytes()),
        };
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        unpacked(value, &Dictionaries::none(), &conn, |text| {
            Ok(text.to_owned())
        })
        .map(|r| r.unwrap())
    }

    fn frame(bytes: &[u8]) -> Result<String, String> {
        read_back("", Some(bytes))
    }

    #[test]
    fn a_long_repetitive_body_is_stored_compressed_and_reads_back_the_same() {
        let json = serde_json::json!({ "entries": vec!["the same words again"; 40] }).to_string();
        let packed = pack(&json, None).expect("compressed");
        assert!(
            packed.len() * 4 < json.len(),
            "{} of {}",
            packed.len(),
            json.len()
        );
        assert_eq!(frame(&packed).unwrap(), json);
        assert_eq!(read_back(&json, None).unwrap(), json);
    }

    #[test]
    fn a_short_body_stays_text() {
        assert_eq!(pack("{\"a\":1}", None), None);
        assert_eq!(pack(&"x".repeat(MIN_PACKED - 1), None), None);
        assert!(pack(&"x".repeat(MIN_PACKED), None).is_some());
    }

    #[test]
    fn a_corrupt_or_lying_frame_is_an_error_not_a_panic_or_an_allocation() {
        let mut packed = pack(&"x".repeat(1000), None).expect("compressed");
        let last = packed.len() - 1;
        packed[last] ^= 0xff;
        packed.truncate(last - 2);
        assert!(frame(&packed).is_err());
        assert!(frame(b"not zstd").is_err());
        // A frame header claiming a terabyte: refused before allocating it.
        let mut header = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0x00]; // FCS 8 bytes, single segment
        header.extend_from_slice(&(1u64 << 40).to_le_bytes());
        let error = frame(&header).unwrap_err();
        assert!(error.contains("claims"), "{error}");
    }

    #[test]
    fn a_frame_of_bytes_that_are_not_utf8_is_an_error() {
        let packed = zstd::bulk::compress(&[0xff; 300], 1).unwrap();
        assert!(frame(&packed).is_err());
    }
}
