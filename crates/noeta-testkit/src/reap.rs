//! Processes a test starts end with the test, whether it passes or fails: [`Reaped`] holds a
//! child and, when dropped, stops it the way a person would (SIGTERM, on which noeta stops its
//! MCP servers and commands), then kills it after a grace. A failed assertion between a spawn
//! and the test's own cleanup leaves nothing running.

use std::ops::{Deref, DerefMut};
use std::process::Child;
use std::time::{Duration, Instant};

/// How long a child gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(3);

/// A child process stopped when this is dropped.
#[derive(Debug)]
pub struct Reaped(Option<Child>);

impl Reaped {
    /// Holds `child`.
    pub fn new(child: Child) -> Self {
        Self(Some(child))
    }

    /// The child, no longer stopped on drop (to wait for its output).
    ///
    /// # Panics
    ///
    /// Never: the child is there until this takes it.
    #[expect(clippy::expect_used, reason = "the child is held until taken")]
    pub fn into_inner(mut self) -> Child {
        self.0.take().expect("the child is held until taken")
    }
}

impl Deref for Reaped {
    type Target = Child;

    #[expect(clippy::expect_used, reason = "the child is held until taken")]
    fn deref(&self) -> &Child {
        self.0.as_ref().expect("the child is held until taken")
    }
}

impl DerefMut for Reaped {
    #[expect(clippy::expect_used, reason = "the child is held until taken")]
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("the child is held until taken")
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < GRACE {
            if !matches!(child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}
