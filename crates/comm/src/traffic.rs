//! Per-stage byte, message and time counters of the communication layer.

use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What one stage moved: bytes sent to other ranks, messages, seconds inside communication calls.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TrafficRow {
    /// Bytes sent to other ranks (self copies are not counted).
    pub bytes: u64,
    /// Messages sent to other ranks.
    pub messages: u64,
    /// Wall time inside communication calls.
    pub seconds: f64,
}

#[derive(Debug, Default)]
pub(crate) struct TrafficState {
    current: String,
    rows: Vec<(String, TrafficRow)>,
}

/// Shared counters of a communicator and all communicators split from it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Counters(Arc<Mutex<TrafficState>>);

impl Counters {
    fn lock(&self) -> std::sync::MutexGuard<'_, TrafficState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn set_stage(&self, name: &str) -> String {
        let mut s = self.lock();
        std::mem::replace(&mut s.current, name.to_string())
    }

    pub(crate) fn add(&self, bytes: u64, messages: u64, start: Instant) {
        let dt = start.elapsed().as_secs_f64();
        let mut s = self.lock();
        let name = if s.current.is_empty() { "other".to_string() } else { s.current.clone() };
        let row = match s.rows.iter().position(|(n, _)| *n == name) {
            Some(i) => &mut s.rows[i].1,
            None => {
                s.rows.push((name, TrafficRow::default()));
                &mut s.rows.last_mut().expect("just pushed").1
            }
        };
        row.bytes += bytes;
        row.messages += messages;
        row.seconds += dt;
    }

    pub(crate) fn rows(&self) -> Vec<(String, TrafficRow)> {
        self.lock().rows.clone()
    }

    pub(crate) fn reset(&self) {
        self.lock().rows.clear();
    }
}

/// Names the stage that communication is counted under until it is dropped (then the previous
/// name is restored). Made by [`Comm::stage`](crate::Comm::stage).
pub struct StageGuard {
    pub(crate) counters: Counters,
    pub(crate) previous: String,
}

impl Drop for StageGuard {
    fn drop(&mut self) {
        let prev = std::mem::take(&mut self.previous);
        self.counters.set_stage(&prev);
    }
}
