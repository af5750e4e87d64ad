//! Which of an ExecuteGraph's three graphs a view shows.

use crate::exec::graph::GraphKind;

/// Which graphs a view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphSelect {
    Init,
    Main,
    DeInit,
    All,
}

impl GraphSelect {
    /// The graphs selected, in Init, Main, DeInit order.
    pub fn kinds(self) -> &'static [GraphKind] {
        match self {
            GraphSelect::Init => &[GraphKind::Init],
            GraphSelect::Main => &[GraphKind::Main],
            GraphSelect::DeInit => &[GraphKind::DeInit],
            GraphSelect::All => &GraphKind::ALL,
        }
    }

    /// From the CLI's `--graph` value: `init`, `main`, `deinit` or `all`.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "init" => Some(GraphSelect::Init),
            "main" => Some(GraphSelect::Main),
            "deinit" => Some(GraphSelect::DeInit),
            "all" => Some(GraphSelect::All),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_select_names() {
        assert_eq!(GraphSelect::from_name("deinit"), Some(GraphSelect::DeInit));
        assert_eq!(GraphSelect::from_name("Main"), None);
        assert_eq!(GraphSelect::All.kinds().len(), 3);
    }
}
