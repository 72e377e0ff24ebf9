//! The zstd dictionaries of a SQLite file, trained from the file's own bodies.
//!
//! Why: a row is compressed alone (any row must read back without its neighbours), and a row of a
//! few hundred bytes has little to compress against; what repeats is across rows and tasks (the
//! entry keys, a skill's state shape, its LLM command's output schema, the id formats). A
//! dictionary of what repeats, given to zstd on both sides, makes the research loop's waiting task
//! a fraction of its size (measured: journal and history, 3.3 KB to 0.7 KB per task).
//!
//! How:
//! - The first [`SAMPLE_BYTES`] of bodies appended after the store opens are kept as a sample;
//!   then a thread trains a [`DICT_BYTES`] dictionary on three quarters of it and measures it on
//!   the rest. It is kept only if it compresses that rest by a tenth better than what is used now
//!   (no dictionary, or the newest one), so a steady workload trains one dictionary, not one per
//!   start.
//! - A kept dictionary is committed to `zstd_dicts` by the writer thread, and only after that
//!   commit do appends compress with it: no row ever names a dictionary the file does not hold.
//! - A frame names its dictionary's id in its header; readers find it in [`Dictionaries`], which
//!   holds every dictionary of the file (they are never deleted: old rows need theirs).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rusqlite::Connection;
use zstd::zstd_safe::{CDict, DDict};

use crate::store::{Encoded, StoreError};

/// Bodies sampled before a dictionary is trained: ZDICT's guide is a hundred times the dictionary.
pub(crate) const SAMPLE_BYTES: usize = 1 << 20;

/// The dictionary's size: on the research loop's journals, 8 to 32 KB compress alike, 64 KB worse.
pub(crate) const DICT_BYTES: usize = 16 * 1024;

/// Bodies longer than this are not sampled (one would crowd out the others).
const MAX_SAMPLED: usize = 64 * 1024;

/// A dictionary is kept when it makes the held-out bodies at most this share of what they take
/// now (in tenths).
const KEEP_TENTHS: usize = 9;

/// The dictionary new frames are compressed with (each frame's header then names its id).
pub(crate) struct Encoder {
    pub cdict: CDict<'static>,
}

/// Every dictionary of one SQLite file, and the sample the next one is trained from.
pub(crate) struct Dictionaries {
    decoders: RwLock<HashMap<u32, Arc<DDict<'static>>>>,
    encoder: RwLock<Option<Arc<Encoder>>>,
    /// Still sampling (one sample per open; `false` once it is taken).
    sampling: AtomicBool,
    sample: Mutex<Sample>,
    /// Samples judged since open (a dictionary trained on each, kept or not).
    judged: AtomicUsize,
}

/// Bodies, concatenated, with their sizes (ZDICT's input).
#[derive(Debug, Default)]
pub(crate) struct Sample {
    bytes: Vec<u8>,
    sizes: Vec<usize>,
}

impl Sample {
    fn push(&mut self, body: &str) {
        if (super::packed::MIN_PACKED..=MAX_SAMPLED).contains(&body.len()) {
            self.bytes.extend_from_slice(body.as_bytes());
            self.sizes.push(body.len());
        }
    }

    fn bodies(&self) -> impl Iterator<Item = &[u8]> {
        self.sizes.iter().scan(0usize, move |at, &size| {
            let body = &self.bytes[*at..*at + size];
            *at += size;
            Some(body)
        })
    }
}

/// A dictionary trained and measured, for the writer to store.
#[derive(Debug)]
pub(crate) struct Trained {
    pub id: u32,
    pub dict: Vec<u8>,
    /// Bodies it was trained on.
    pub samples: usize,
    /// The held-out bodies' bytes as stored now, and with it.
    pub before: usize,
    pub after: usize,
    /// How long training and measuring took.
    pub took: std::time::Duration,
}

impl Dictionaries {
    /// No dictionaries, and no sampling (for reads before the table exists).
    pub fn none() -> Self {
        Dictionaries {
            decoders: RwLock::default(),
            encoder: RwLock::default(),
            sampling: AtomicBool::new(false),
            sample: Mutex::default(),
            judged: AtomicUsize::new(0),
        }
    }

    /// The dictionaries stored in the file (the newest compresses), sampling for the next.
    pub fn load(conn: &Connection) -> Result<Self, StoreError> {
        let dicts = Dictionaries::none();
        let mut stmt =
            conn.prepare("SELECT id, dict FROM zstd_dicts ORDER BY trained_at_ms, id")?;
        let mut rows = stmt.query([])?;
        let mut newest = None;
        while let Some(row) = rows.next()? {
            let id: i64 = super::get(row, "id")?;
            let dict: Vec<u8> = super::get(row, "dict")?;
            // A damaged dictionary fails only the rows that name it (each a `Corrupt` error).
            match u32::try_from(id)
                .map_err(|e| e.to_string())
                .and_then(|id| dicts.add_decoder(id, &dict).map(|()| id))
            {
                Ok(id) => newest = Some((id, dict)),
                Err(reason) => {
                    tracing::warn!(id, %reason, "sqlite: a compression dictionary does not load");
                }
            }
        }
        // Only the newest compresses: one encoder is built, however many the file holds.
        if let Some((id, dict)) = newest {
            if let Err(reason) = dicts.set_encoder(&dict) {
                tracing::warn!(id, %reason, "sqlite: the newest compression dictionary does not load");
            }
        }
        dicts.sampling.store(true, Ordering::Relaxed);
        Ok(dicts)
    }

    /// Make dictionary `id` readable, and the one new frames use.
    pub fn install(&self, id: u32, dict: &[u8]) -> Result<(), String> {
        self.add_decoder(id, dict)?;
        self.set_encoder(dict)
    }

    fn add_decoder(&self, id: u32, dict: &[u8]) -> Result<(), String> {
        let ddict = decoder(id, dict)?;
        write(&self.decoders).insert(id, Arc::new(ddict));
        Ok(())
    }

    fn set_encoder(&self, dict: &[u8]) -> Result<(), String> {
        let cdict =
            CDict::try_create(dict, super::packed::LEVEL).ok_or("zstd refuses the dictionary")?;
        *write(&self.encoder) = Some(Arc::new(Encoder { cdict }));
        Ok(())
    }

    /// Dictionary `id`, from the file through `conn` when this store does not hold it yet: the
    /// process writing the file may have trained it after this one opened (a `radkit tasks`
    /// beside a running server). `Err` says why there is none.
    pub fn decoder_from(&self, id: u32, conn: &Connection) -> Result<Arc<DDict<'static>>, String> {
        if let Some(ddict) = self.decoder(id) {
            return Ok(ddict);
        }
        let dict: Option<Vec<u8>> = conn
            .query_row(
                "SELECT dict FROM zstd_dicts WHERE id = ?1",
                [i64::from(id)],
                |r| r.get(0),
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e.to_string()),
            })?;
        let dict = dict.ok_or_else(|| {
            format!("a zstd frame of dictionary {id}, which this file does not hold")
        })?;
        let ddict = Arc::new(decoder(id, &dict)?);
        write(&self.decoders).insert(id, ddict.clone());
        Ok(ddict)
    }

    /// The dictionary new frames use, if any.
    pub fn encoder(&self) -> Option<Arc<Encoder>> {
        self.encoder
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Dictionary `id`, if the file has it.
    pub fn decoder(&self, id: u32) -> Option<Arc<DDict<'static>>> {
        self.decoders
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
    }

    /// Samples judged since open: the training thread is done with each (a kept dictionary is
    /// then queued to the writer).
    #[cfg(test)]
    pub fn judged(&self) -> usize {
        self.judged.load(Ordering::Acquire)
    }

    /// Count one more sample judged; the count since open.
    pub(super) fn note_judged(&self) -> usize {
        self.judged.fetch_add(1, Ordering::Release) + 1
    }

    /// Whether the file holds dictionary `id`.
    pub fn has(&self, id: u32) -> bool {
        self.decoder(id).is_some()
    }

    /// Sample `encoded`'s bodies while sampling; the whole sample once it is [`SAMPLE_BYTES`]
    /// (sampling then stops).
    pub fn offer(&self, encoded: &Encoded) -> Option<Sample> {
        if !self.sampling.load(Ordering::Relaxed) {
            return None;
        }
        let mut sample = self.sample.lock().unwrap_or_else(|p| p.into_inner());
        if !self.sampling.load(Ordering::Relaxed) {
            return None;
        }
        sample.push(&encoded.body);
        encoded
            .view
            .history
            .iter()
            .for_each(|(_, m)| sample.push(m));
        encoded
            .view
            .artifacts
            .iter()
            .for_each(|a| sample.push(&a.3));
        if sample.bytes.len() < SAMPLE_BYTES {
            return None;
        }
        self.sampling.store(false, Ordering::Relaxed);
        Some(std::mem::take(&mut *sample))
    }
}

/// Dictionary `dict` for reading, checked to be the `id` it is stored as.
fn decoder(id: u32, dict: &[u8]) -> Result<DDict<'static>, String> {
    let named = zstd::zstd_safe::get_dict_id_from_dict(dict).map(|id| id.get());
    if named != Some(id) {
        return Err(format!("dictionary {id} names itself {named:?}"));
    }
    DDict::try_create(dict).ok_or_else(|| "zstd refuses the dictionary".to_owned())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

/// Train a dictionary on three bodies in four of `sample` and measure it on the fourth, against
/// `current` (or none); `Err` says why none is kept: too few bodies, nothing to learn, no better
/// than `current`.
pub(crate) fn train(sample: &Sample, current: Option<&Encoder>) -> Result<Trained, String> {
    let started = std::time::Instant::now();
    let (mut data, mut sizes, mut held_out) = (Vec::new(), Vec::new(), Vec::new());
    for (i, body) in sample.bodies().enumerate() {
        if i % 4 == 3 {
            held_out.push(body);
        } else {
            data.extend_from_slice(body);
            sizes.push(body.len());
        }
    }
    if sizes.len() < 32 || held_out.is_empty() {
        return Err(format!("{} bodies are too few to train on", sizes.len()));
    }
    let dict = zstd::dict::from_continuous(&data, &sizes, DICT_BYTES).map_err(|e| e.to_string())?;
    let id = zstd::zstd_safe::get_dict_id_from_dict(&dict)
        .ok_or("the trained dictionary has no id")?
        .get();
    let cdict =
        CDict::try_create(&dict, super::packed::LEVEL).ok_or("zstd refuses the dictionary")?;
    let candidate = Encoder { cdict };
    let stored = |encoder: Option<&Encoder>| -> usize {
        held_out
            .iter()
            .map(|body| {
                std::str::from_utf8(body)
                    .ok()
                    .and_then(|text| super::packed::pack(text, encoder))
                    .map_or(body.len(), |frame| frame.len())
            })
            .sum()
    };
    let (before, after) = (stored(current), stored(Some(&candidate)));
    if after * 10 > before * KEEP_TENTHS {
        return Err(format!(
            "it stores the held-out bodies in {after} bytes, against {before} now"
        ));
    }
    Ok(Trained {
        id,
        dict,
        samples: sizes.len(),
        before,
        after,
        took: started.elapsed(),
    })
}

/// Store `trained` in the file (the writer thread, in a transaction of its own).
pub(crate) fn store(conn: &mut Connection, trained: &Trained) -> Result<(), StoreError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute(
        "INSERT INTO zstd_dicts (id, dict, trained_at_ms, samples) VALUES (?1, ?2, ?3, ?4)",
        rusqlite::params![
            i64::from(trained.id),
            trained.dict,
            now,
            i64::try_from(trained.samples).unwrap_or(i64::MAX)
        ],
    )?;
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// JSON bodies alike in shape, unlike in content, as a skill's journal rows are.
    fn bodies(from: usize, count: usize) -> Vec<String> {
        (from..from + count)
            .map(|i| {
                serde_json::json!({ "activated": { "visit": i % 9, "step": "critique",
                    "state": { "draft": format!("Draft {i} on durable agents"), "cycle": i % 4,
                               "notes": [format!("note {}", i * 31 % 97), "Add sources."] },
                    "event": { "user_message": { "role": "user", "messageId": format!("m-{i}") } } } })
                .to_string()
            })
            .collect()
    }

    fn sample(bodies: &[String]) -> Sample {
        let mut sample = Sample::default();
        bodies.iter().for_each(|b| sample.push(b));
        sample
    }

    #[test]
    fn a_trained_dictionary_shrinks_frames_that_read_back_only_with_it() {
        let trained = train(&sample(&bodies(0, 2000)), None).expect("a dictionary is kept");
        assert!(trained.after * 2 < trained.before, "{trained:?}");
        let dictionaries = Dictionaries::none();
        dictionaries.install(trained.id, &trained.dict).unwrap();
        let encoder = dictionaries.encoder().unwrap();
        // The file a reader reads: without the dictionary, then with it.
        let mut file = Connection::open_in_memory().unwrap();
        file.execute_batch(super::super::schema::MIGRATIONS[11])
            .unwrap();
        let frames: Vec<(String, Vec<u8>)> = bodies(5000, 20)
            .into_iter()
            .map(|body| {
                let frame = super::super::packed::pack(&body, Some(&encoder)).unwrap();
                let plain = super::super::packed::pack(&body, None).unwrap();
                assert!(
                    frame.len() < plain.len(),
                    "{} against {}",
                    frame.len(),
                    plain.len()
                );
                (body, frame)
            })
            .collect();
        let read = |d: &Dictionaries, file: &Connection, frame: &[u8]| {
            let value = rusqlite::types::ValueRef::Blob(frame);
            super::super::packed::unpacked(value, d, file, |t| Ok(t.to_owned())).map(Result::unwrap)
        };
        // A reader that opened before the dictionary was trained.
        let reader = Dictionaries::none();
        for (body, frame) in &frames {
            assert_eq!(read(&dictionaries, &file, frame).unwrap(), *body);
            let missing = read(&reader, &file, frame).unwrap_err();
            assert!(
                missing.contains(&format!("dictionary {}", trained.id)),
                "{missing}"
            );
        }
        // Once the writer stored it, that reader finds it in the file on first sight.
        store(&mut file, &trained).unwrap();
        for (body, frame) in &frames {
            assert_eq!(read(&reader, &file, frame).unwrap(), *body);
        }
        assert!(reader.has(trained.id) && reader.encoder().is_none());
    }

    #[test]
    fn no_dictionary_is_kept_when_it_is_not_a_tenth_better_or_the_sample_is_too_small() {
        let trained = train(&sample(&bodies(0, 2000)), None).unwrap();
        let dictionaries = Dictionaries::none();
        dictionaries.install(trained.id, &trained.dict).unwrap();
        // The same workload again: the dictionary in use already does as well.
        let again = train(
            &sample(&bodies(2000, 2000)),
            dictionaries.encoder().as_deref(),
        );
        assert!(again.unwrap_err().contains("against"));
        assert!(train(&sample(&bodies(0, 10)), None)
            .unwrap_err()
            .contains("too few"));
    }

    #[test]
    fn sampling_takes_one_sample_of_sample_bytes_then_stops() {
        let dictionaries = Dictionaries::none();
        dictionaries.sampling.store(true, Ordering::Relaxed);
        let append = crate::store::Append::new(
            "t",
            1,
            vec![crate::journal::Entry::MessageReceived {
                message: crate::model::Message::user_text("x".repeat(1000)),
            }],
        );
        let encoded = Encoded::new(append).unwrap();
        let mut offers = 0;
        let sample = loop {
            offers += 1;
            if let Some(sample) = dictionaries.offer(&encoded) {
                break sample;
            }
            assert!(offers < 10_000);
        };
        assert!(sample.bytes.len() >= SAMPLE_BYTES);
        // Each append gives its journal row and its history message.
        assert_eq!(sample.sizes.len(), offers * 2);
        assert!(dictionaries.offer(&encoded).is_none());
        assert!(dictionaries.sample.lock().unwrap().bytes.is_empty());
    }

    #[test]
    fn a_damaged_dictionary_does_not_install() {
        let dictionaries = Dictionaries::none();
        assert!(dictionaries.install(40_000, b"not a dictionary").is_err());
        let trained = train(&sample(&bodies(0, 2000)), None).unwrap();
        assert!(dictionaries.install(trained.id ^ 1, &trained.dict).is_err());
        assert!(dictionaries.encoder().is_none());
    }
}
