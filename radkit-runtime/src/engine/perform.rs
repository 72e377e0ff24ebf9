//! Performing one `llm` or `tool` command: attempts with exponential backoff and jitter, every failed
//! attempt journaled, the receipt recorded, crash hooks at each boundary. Each attempt holds one of
//! its task's effect slots (the bound on parallel effects inside a step). On a shared store an
//! attempt starts only while the run's lease has a third of its lifetime left by the engine's own
//! clock (`Inner::lease_lasts`), and an `AtMostOnce` attempt only after the store confirms the run
//! still holds it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::fault::Boundary;
use super::machine::rules::{self, Attempted};
use super::run::TaskRun;
use super::{Inner, TokenChunk};
use crate::flow::{Cmd, CmdKind, EffectPolicy, InvocationId, Receipt};

impl Inner {
    /// Perform `cmd` until it succeeds, fails permanently or runs out of attempts, and record its
    /// receipt (buffered; flushed before anything that depends on it leaves, and at once for
    /// `AtMostOnce` commands). `None` means the engine halted.
    pub(crate) async fn perform(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        id: &InvocationId,
        cmd: &Cmd,
        prior_attempts: u32,
    ) -> Option<Receipt> {
        let span = crate::telemetry::engine_span!(run, "command", task = %run.task_id, skill = %run.skill_id, invocation = %id, kind = cmd.kind.kind_name(), what = %cmd.kind.fingerprint(), policy = ?cmd.policy, attempt = tracing::field::Empty);
        tracing::Instrument::instrument(self.attempts(run, id, cmd, prior_attempts), span).await
    }

    async fn attempts(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        id: &InvocationId,
        cmd: &Cmd,
        prior_attempts: u32,
    ) -> Option<Receipt> {
        // Only the fault hook's crash boundaries read it: no string per command without one.
        let what = self.config.fault.is_some().then(|| cmd.kind.fingerprint());
        let what = what.as_deref();
        if self.crash_at(Boundary::CommandJournaled, run, Some(id), what) {
            return None;
        }
        let mut attempt = prior_attempts;
        loop {
            attempt += 1;
            // The command's span says the attempt it is on (the last one, once it ends).
            tracing::Span::current().record("attempt", attempt);
            // The task's bound on effects in flight (`EngineBuilder::max_parallel_effects`): one slot
            // per attempt, so a call waiting out its backoff leaves room for its siblings.
            let slot = run.effect_slots.acquire().await.ok()?;
            if run.is_halted() {
                return None;
            }
            if !self.lease_lasts(run).await {
                return None;
            }
            if !cmd.policy.reissue_allowed() && !self.may_start_at_most_once(run).await {
                return None;
            }
            let started = std::time::Instant::now();
            let result = if self.crash_at(Boundary::DuringEffect, run, Some(id), what) {
                // The process "dies" while the effect is in flight: the effect may still complete.
                let engine = self.clone();
                let (id2, kind) = (id.clone(), cmd.kind.clone());
                tokio::spawn(async move {
                    let _ = engine.effects.perform(&id2, &kind).await;
                });
                return None;
            } else {
                let tokens = self.tokens_of(run, id, cmd, attempt);
                self.effects.perform_streaming(id, &cmd.kind, &tokens).await
            };
            tracing::debug!(task = %run.task_id, invocation = %id, policy = ?cmd.policy, attempt, latency_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX), ok = result.is_ok(), "command attempt");
            if self.crash_at(Boundary::EffectReturned, run, Some(id), what) {
                return None;
            }
            let attempted =
                rules::attempted(&mut run.lock(), id, cmd, attempt, prior_attempts, result);
            match attempted {
                Attempted::Retry(delay) => {
                    self.metrics
                        .retry(cmd.kind.kind_name(), policy_label(cmd.policy));
                    drop(slot);
                    tokio::time::sleep(delay).await;
                }
                Attempted::Receipt(receipt) => {
                    self.metrics.command(
                        cmd.kind.kind_name(),
                        policy_label(cmd.policy),
                        receipt.outcome.is_ok(),
                    );
                    let crash = self.wants_crash(Boundary::ReceiptWritten, run, Some(id), what);
                    if crash || !cmd.policy.reissue_allowed() {
                        // Narrow the window in which an at-most-once outcome could be lost; and make the
                        // receipt durable before an injected crash at this boundary.
                        let flushed = run.flush().await;
                        if crash {
                            self.halt();
                            return None;
                        }
                        flushed.ok()?;
                    }
                    return Some(receipt);
                }
            }
        }
    }

    /// Where the attempt of a streamed model call sends its text: the task's subscribers here,
    /// each piece numbered within the attempt. Nowhere for every other command.
    fn tokens_of(
        &self,
        run: &TaskRun,
        id: &InvocationId,
        cmd: &Cmd,
        attempt: u32,
    ) -> crate::llm::Tokens {
        let CmdKind::Llm {
            stream: Some(to), ..
        } = &cmd.kind
        else {
            return crate::llm::Tokens::none();
        };
        let stream = Ended {
            stream: self.live.tokens(&run.task_id),
            id: id.clone(),
            attempt,
        };
        let to = to.clone();
        let index = AtomicU32::new(0);
        crate::llm::Tokens::new(move |text| {
            stream.stream.send(TokenChunk {
                invocation_id: stream.id.clone(),
                attempt,
                index: index.fetch_add(1, Ordering::Relaxed),
                text: text.to_owned(),
                to: to.clone(),
            });
        })
    }
}

/// A streamed attempt's hold on its task's text: when the attempt's `Tokens` are dropped (the
/// model returned), the pieces kept for late subscribers are forgotten.
struct Ended {
    stream: Arc<super::live::TokenStream>,
    id: InvocationId,
    attempt: u32,
}

impl Drop for Ended {
    fn drop(&mut self) {
        self.stream.ended(&self.id, self.attempt);
    }
}

/// The metrics label of an effect policy.
fn policy_label(policy: EffectPolicy) -> &'static str {
    match policy {
        EffectPolicy::Idempotent => "idempotent",
        EffectPolicy::AtLeastOnce => "at_least_once",
        EffectPolicy::AtMostOnce => "at_most_once",
        EffectPolicy::Compensate => "compensate",
    }
}
