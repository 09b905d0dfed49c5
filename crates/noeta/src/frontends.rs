//! Frontends: what the `noeta` command can open over the runtime (seed 003's `frontends`
//! discovery group), found by name.
//!
//! Two are built in: `terminal` (the `noeta` command's own printer and prompts) and `web` (a
//! page `noeta serve` serves at `/`, talking to the HTTP API). A third party adds one by
//! linking a crate that implements [`Frontend`] and putting it in the list its host binary
//! builds with [`Frontends::with`]; a web frontend brings its files as [`Asset`]s, which the
//! server serves under its strict Content-Security-Policy.

use std::sync::Arc;

/// One file of a web frontend, served at `path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asset {
    /// Where it is served (`/` for the page itself).
    pub path: &'static str,
    /// Its media type.
    pub media_type: &'static str,
    /// Its bytes.
    pub body: &'static [u8],
}

/// Something the `noeta` command can open over the runtime.
pub trait Frontend: Send + Sync {
    /// Its name (`noeta open NAME`).
    fn name(&self) -> &str;
    /// One line on what it is.
    fn description(&self) -> &str;
    /// The files a server serves for it, the page at `/` first; empty for a frontend that is
    /// not a web page.
    fn assets(&self) -> &[Asset] {
        &[]
    }
}

impl std::fmt::Debug for dyn Frontend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frontend")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// The terminal: the `noeta` command's printer, status line and prompts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Terminal;

impl Frontend for Terminal {
    fn name(&self) -> &str {
        "terminal"
    }
    fn description(&self) -> &str {
        "the terminal: `noeta run`, `noeta chat`, with prompts for asks and questions"
    }
}

/// The built-in web page: the task list, a task's live transcript, its asks and questions,
/// the next message, cancel, and the raw log; plain modules, no build step.
#[derive(Debug, Clone, Copy, Default)]
pub struct Web;

const WEB_ASSETS: [Asset; 3] = [
    Asset {
        path: "/",
        media_type: "text/html; charset=utf-8",
        body: include_bytes!("../web/index.html"),
    },
    Asset {
        path: "/assets/app.js",
        media_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../web/app.js"),
    },
    Asset {
        path: "/assets/app.css",
        media_type: "text/css; charset=utf-8",
        body: include_bytes!("../web/app.css"),
    },
];

impl Frontend for Web {
    fn name(&self) -> &str {
        "web"
    }
    fn description(&self) -> &str {
        "a page in the browser, served by `noeta serve`: watch tasks live, answer them, read their history"
    }
    fn assets(&self) -> &[Asset] {
        &WEB_ASSETS
    }
}

/// The frontends a host offers, by name.
#[derive(Clone)]
pub struct Frontends(Vec<Arc<dyn Frontend>>);

impl std::fmt::Debug for Frontends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|x| x.name()))
            .finish()
    }
}

impl Default for Frontends {
    fn default() -> Self {
        Self::standard()
    }
}

impl Frontends {
    /// The built-in ones: `terminal` and `web`.
    pub fn standard() -> Self {
        Self(vec![Arc::new(Terminal), Arc::new(Web)])
    }

    /// This list with `frontend` added (replacing one of the same name).
    pub fn with(mut self, frontend: Arc<dyn Frontend>) -> Self {
        self.0.retain(|f| f.name() != frontend.name());
        self.0.push(frontend);
        self
    }

    /// Every frontend, in the order added.
    pub fn all(&self) -> &[Arc<dyn Frontend>] {
        &self.0
    }

    /// The frontend called `name`, or an error listing the known ones.
    pub fn find(&self, name: &str) -> Result<Arc<dyn Frontend>, String> {
        self.0
            .iter()
            .find(|f| f.name() == name)
            .cloned()
            .ok_or_else(|| {
                let known: Vec<&str> = self.0.iter().map(|f| f.name()).collect();
                format!(
                    "there is no frontend `{name}` — known frontends: {}",
                    known.join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontends_are_found_by_name_and_a_linked_one_is_added() {
        struct Mine;
        impl Frontend for Mine {
            fn name(&self) -> &str {
                "mine"
            }
            fn description(&self) -> &str {
                "a third party's"
            }
        }
        let list = Frontends::standard().with(Arc::new(Mine));
        assert_eq!(list.find("web").unwrap().assets()[0].path, "/");
        assert!(list.find("terminal").unwrap().assets().is_empty());
        assert_eq!(list.find("mine").unwrap().description(), "a third party's");
        let err = list.find("tui").err().unwrap();
        assert_eq!(
            err,
            "there is no frontend `tui` — known frontends: terminal, web, mine"
        );
    }
}
