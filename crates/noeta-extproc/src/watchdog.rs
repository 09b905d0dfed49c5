//! Per-call deadlines of one plugin program, kept by one thread per program.
//!
//! A hook call arms a deadline and disarms it when answered. The thread sleeps until the
//! earliest deadline (or a second when none is armed) and is woken only when a call arms one
//! earlier than that, so a steady stream of calls costs no thread wake-up of its own.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long the thread sleeps when no deadline is armed.
const IDLE: Duration = Duration::from_secs(1);

#[derive(Default)]
struct State {
    /// Armed deadlines by call id: when, and the reason a miss gives.
    armed: HashMap<u64, (Instant, String)>,
    /// When the thread wakes next on its own.
    sleeping_until: Option<Instant>,
    stopped: bool,
}

/// The deadlines of one program's calls.
#[derive(Default)]
pub(crate) struct Watchdog {
    state: Mutex<State>,
    wake: Condvar,
}

impl Watchdog {
    /// Arms call `id`'s deadline: missed, `reason` is given to the thread's `on_miss`.
    pub(crate) fn arm(&self, id: u64, after: Duration, reason: String) {
        let at = Instant::now() + after;
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.armed.insert(id, (at, reason));
        if state.sleeping_until.is_none_or(|until| at < until) {
            self.wake.notify_one();
        }
    }

    /// Disarms call `id`'s deadline (answered or given up).
    pub(crate) fn disarm(&self, id: u64) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .armed
            .remove(&id);
    }

    /// Ends the thread.
    pub(crate) fn stop(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stopped = true;
        self.wake.notify_one();
    }

    /// The thread's loop: calls `on_miss(id, reason)` for every deadline that passes armed,
    /// until [`stop`](Self::stop).
    pub(crate) fn run(&self, on_miss: impl Fn(u64, String)) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if state.stopped {
                return;
            }
            let now = Instant::now();
            let earliest = state
                .armed
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(id, (at, _))| (*id, *at));
            if let Some((id, at)) = earliest
                && at <= now
            {
                let missed = state.armed.remove(&id);
                drop(state);
                if let Some((_, reason)) = missed {
                    on_miss(id, reason);
                }
                state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let until = earliest.map_or(now + IDLE, |(_, at)| at.min(now + IDLE));
            state.sleeping_until = Some(until);
            state = self
                .wake
                .wait_timeout(state, until.saturating_duration_since(now))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            state.sleeping_until = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::mpsc;

    use super::*;

    fn started() -> (Arc<Watchdog>, mpsc::Receiver<(u64, String)>) {
        let watchdog = Arc::new(Watchdog::default());
        let (tx, rx) = mpsc::channel();
        let running = Arc::clone(&watchdog);
        std::thread::spawn(move || {
            running.run(|id, reason| drop(tx.send((id, reason))));
        });
        (watchdog, rx)
    }

    #[test]
    fn a_deadline_that_passes_armed_is_missed_once_and_others_are_not() {
        let (watchdog, missed) = started();
        watchdog.arm(1, Duration::from_secs(60), "one".to_owned());
        watchdog.arm(2, Duration::from_millis(20), "two".to_owned());
        watchdog.arm(3, Duration::from_millis(10), "three".to_owned());
        watchdog.disarm(3);
        let got = missed.recv_timeout(Duration::from_secs(5));
        assert_eq!(got, Ok((2, "two".to_owned())));
        assert!(missed.recv_timeout(Duration::from_millis(100)).is_err());
        watchdog.stop();
    }

    #[test]
    fn an_earlier_deadline_wakes_a_thread_sleeping_until_a_later_one() {
        let (watchdog, missed) = started();
        watchdog.arm(1, Duration::from_secs(60), "late".to_owned());
        std::thread::sleep(Duration::from_millis(20));
        let start = Instant::now();
        watchdog.arm(2, Duration::from_millis(10), "early".to_owned());
        assert_eq!(
            missed.recv_timeout(Duration::from_secs(5)),
            Ok((2, "early".to_owned()))
        );
        // Well before the idle second: the arm woke the thread.
        assert!(start.elapsed() < Duration::from_millis(900));
        watchdog.stop();
    }
}
