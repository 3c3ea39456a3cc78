//! The tools of an agent over time: built-in tools, plus the tools of each source, which may
//! join late (a slow MCP server) or change (`tools/list_changed`). Every run works on the
//! catalog as it was when the run started; later changes reach later runs.
//!
//! A source's tools are offered only while it is up: a source that stops (an MCP server that
//! crashed) moves its change counter, its tools leave the catalog, and they come back when it
//! says it is up again.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError, RwLock, Weak},
};

use agentloop_protocol::{SourceHealth, SourceState, SourceStatus};

use crate::{
    catalog::ToolCatalog,
    settings::ToolSettings,
    tool::{Tool, ToolError, ToolSource},
};

/// What the catalog is built from.
struct Parts {
    builtins: Vec<Arc<dyn Tool>>,
    /// The tools of each source, by source name.
    sources: BTreeMap<String, Vec<Arc<dyn Tool>>>,
    /// Every source the registry was told about, by name, for its status.
    known: BTreeMap<String, Known>,
}

enum Known {
    /// Joined: asked for its health whenever a status is wanted. Weak, like its watcher: the
    /// registry must not keep a server alive.
    Joined(Weak<dyn ToolSource>, SourceHealth),
    /// Not joined (yet): still starting, or left out.
    Noted(SourceHealth),
}

/// The agent's tools, rebuilt into a new catalog whenever a source joins or changes.
pub struct ToolRegistry {
    parts: Mutex<Parts>,
    settings: BTreeMap<String, ToolSettings>,
    descriptions: BTreeMap<String, String>,
    catalog: RwLock<Arc<ToolCatalog>>,
}

impl ToolRegistry {
    pub fn new(
        builtins: Vec<Arc<dyn Tool>>,
        settings: BTreeMap<String, ToolSettings>,
        descriptions: BTreeMap<String, String>,
    ) -> Self {
        let catalog = ToolCatalog::with_descriptions(builtins.clone(), &settings, &descriptions);
        Self {
            parts: Mutex::new(Parts {
                builtins,
                sources: BTreeMap::new(),
                known: BTreeMap::new(),
            }),
            settings,
            descriptions,
            catalog: RwLock::new(Arc::new(catalog)),
        }
    }

    /// The catalog now.
    pub fn catalog(&self) -> Arc<ToolCatalog> {
        self.catalog
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sets the tools of `source` (replacing what it offered before) and returns the new
    /// catalog.
    pub fn set_source_tools(&self, source: &str, tools: Vec<Arc<dyn Tool>>) -> Arc<ToolCatalog> {
        let mut parts = self.lock_parts();
        parts.sources.insert(source.to_string(), tools);
        let all: Vec<Arc<dyn Tool>> = parts
            .builtins
            .iter()
            .chain(parts.sources.values().flatten())
            .cloned()
            .collect();
        let catalog = Arc::new(ToolCatalog::with_descriptions(
            all,
            &self.settings,
            &self.descriptions,
        ));
        // Swapped while the parts are locked, so that two changes land in their order.
        *self.catalog.write().unwrap_or_else(PoisonError::into_inner) = catalog.clone();
        catalog
    }

    /// Lists the tools of `source` now, and keeps listing them each time the source says they
    /// changed (for as long as it can say so); while the source is not up, it offers none.
    /// Returns the catalog with them, or why the source could not be listed.
    pub async fn add_source(
        self: &Arc<Self>,
        source: Arc<dyn ToolSource>,
    ) -> Result<Arc<ToolCatalog>, SourceLeftOut> {
        let changes = source.changes();
        let tools = match offered_tools(source.as_ref()).await {
            Ok(tools) => tools,
            Err(error) => {
                let left_out = SourceLeftOut {
                    name: source.name().to_owned(),
                    error,
                };
                let mut health = source.status();
                health.state = SourceState::Down {
                    reason: left_out.to_string(),
                };
                self.note_source(source.name(), health);
                return Err(left_out);
            }
        };
        self.lock_parts().known.insert(
            source.name().to_owned(),
            Known::Joined(Arc::downgrade(&source), source.status()),
        );
        let catalog = self.set_source_tools(source.name(), tools);
        if let Some(mut changes) = changes {
            // Weak on both sides: the watcher must not keep an agent or a server alive.
            let registry = Arc::downgrade(self);
            let source = Arc::downgrade(&source);
            tokio::spawn(async move {
                while changes.changed().await.is_ok() {
                    let (Some(registry), Some(source)) = (registry.upgrade(), source.upgrade())
                    else {
                        return;
                    };
                    match offered_tools(source.as_ref()).await {
                        Ok(tools) => {
                            let offered = tools.len();
                            let catalog = registry.set_source_tools(source.name(), tools);
                            tracing::info!(
                                source = source.name(),
                                offered,
                                tools = catalog.len(),
                                "the tools of a source changed"
                            );
                        }
                        Err(error) => tracing::warn!(
                            source = source.name(),
                            %error,
                            "cannot list the tools of a source that changed"
                        ),
                    }
                }
            });
        }
        Ok(catalog)
    }

    /// Records a source that did not join (yet), so that its status is reported: one still
    /// starting, or one left out because it could not start. A source that joins later
    /// replaces it.
    pub fn note_source(&self, name: &str, health: SourceHealth) {
        self.lock_parts()
            .known
            .insert(name.to_owned(), Known::Noted(health));
    }

    /// Every source the registry knows, by name: how it is doing and how many tools new runs
    /// are offered from it. Cheap (no I/O): meant for health checks.
    pub fn source_statuses(&self) -> Vec<SourceStatus> {
        let parts = self.lock_parts();
        parts
            .known
            .iter()
            .map(|(name, known)| {
                let health = match known {
                    Known::Joined(source, joined) => match source.upgrade() {
                        Some(source) => source.status(),
                        None => SourceHealth {
                            state: SourceState::Down {
                                reason: "it was shut down".to_owned(),
                            },
                            ..joined.clone()
                        },
                    },
                    Known::Noted(health) => health.clone(),
                };
                SourceStatus {
                    name: name.clone(),
                    health,
                    tools: parts.sources.get(name).map_or(0, Vec::len),
                }
            })
            .collect()
    }

    fn lock_parts(&self) -> std::sync::MutexGuard<'_, Parts> {
        self.parts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a source offers now: its tools while it is up, none otherwise.
/// A tool source whose tools could not be listed: it offers none.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("tool source {name} is left out: {error}")]
pub struct SourceLeftOut {
    pub name: String,
    #[source]
    pub error: ToolError,
}

async fn offered_tools(source: &dyn ToolSource) -> Result<Vec<Arc<dyn Tool>>, ToolError> {
    if source.status().state.is_up() {
        source.tools().await
    } else {
        Ok(Vec::new())
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("catalog", &self.catalog())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use serde_json::json;
    use tokio::sync::watch;

    use agentloop_protocol::SourceTransport;

    use super::*;
    use crate::tool::{FnTool, ToolOutput};

    fn tool(name: &str) -> Arc<dyn Tool> {
        Arc::new(FnTool::new(
            name,
            "t",
            json!({"type": "object"}),
            |_, _| async { Ok(ToolOutput::text("ok")) },
        ))
    }

    /// A source whose tools and health are set by the test, with a change counter.
    struct Changing {
        tools: Mutex<Vec<&'static str>>,
        version: watch::Sender<u64>,
        health: Mutex<SourceHealth>,
    }

    impl Changing {
        fn new(tools: Vec<&'static str>) -> Arc<Self> {
            Arc::new(Self {
                tools: Mutex::new(tools),
                version: watch::Sender::new(0),
                health: Mutex::new(SourceHealth::up(SourceTransport::Stdio)),
            })
        }

        fn set_state(&self, state: SourceState) {
            self.health.lock().unwrap().state = state;
            self.version.send_modify(|v| *v += 1);
        }
    }

    #[async_trait]
    impl ToolSource for Changing {
        fn name(&self) -> &str {
            "remote"
        }

        async fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, ToolError> {
            let names = self.tools.lock().unwrap().clone();
            Ok(names.into_iter().map(tool).collect())
        }

        fn changes(&self) -> Option<watch::Receiver<u64>> {
            Some(self.version.subscribe())
        }

        fn status(&self) -> SourceHealth {
            self.health.lock().unwrap().clone()
        }
    }

    /// Waits (boundedly) until the catalog has `count` tools.
    async fn wait_for_len(registry: &ToolRegistry, count: usize) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while registry.catalog().len() != count {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the catalog never had {count} tools: {:?}",
                names(&registry.catalog())
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    fn names(catalog: &ToolCatalog) -> Vec<String> {
        catalog
            .entries()
            .iter()
            .map(|e| e.name().to_string())
            .collect()
    }

    #[tokio::test]
    async fn sources_join_late_and_their_changes_are_followed() {
        let registry = Arc::new(ToolRegistry::new(
            vec![tool("local.clock")],
            BTreeMap::new(),
            BTreeMap::new(),
        ));
        let before = registry.catalog();
        assert_eq!(names(&before), ["local.clock"]);

        let source = Changing::new(vec!["remote.a"]);
        registry.add_source(source.clone()).await.unwrap();
        assert_eq!(names(&registry.catalog()), ["local.clock", "remote.a"]);
        assert_eq!(
            names(&before),
            ["local.clock"],
            "a snapshot taken earlier does not change"
        );

        *source.tools.lock().unwrap() = vec!["remote.a", "remote.b"];
        source.version.send_modify(|v| *v += 1);
        wait_for_len(&registry, 3).await;
        assert_eq!(
            names(&registry.catalog()),
            ["local.clock", "remote.a", "remote.b"]
        );
    }

    #[tokio::test]
    async fn a_source_that_is_not_up_offers_nothing_until_it_is_again() {
        let registry = Arc::new(ToolRegistry::new(
            vec![tool("local.clock")],
            BTreeMap::new(),
            BTreeMap::new(),
        ));
        let source = Changing::new(vec!["remote.a", "remote.b"]);
        registry.add_source(source.clone()).await.unwrap();
        let statuses = registry.source_statuses();
        assert_eq!(statuses.len(), 1);
        assert_eq!(statuses[0].name, "remote");
        assert_eq!(statuses[0].health.state, SourceState::Up);
        assert_eq!(statuses[0].tools, 2);

        let restarting = SourceState::Restarting {
            reason: "it exited with status 3".to_owned(),
            attempt: 1,
        };
        source.set_state(restarting.clone());
        wait_for_len(&registry, 1).await;
        assert_eq!(names(&registry.catalog()), ["local.clock"]);
        let statuses = registry.source_statuses();
        assert_eq!(statuses[0].health.state, restarting);
        assert_eq!(statuses[0].tools, 0);

        source.set_state(SourceState::Up);
        wait_for_len(&registry, 3).await;
        assert_eq!(registry.source_statuses()[0].tools, 2);

        // Gone: reported down, without keeping the source alive.
        let weak = Arc::downgrade(&source);
        drop(source);
        assert!(weak.upgrade().is_none());
        assert!(matches!(
            &registry.source_statuses()[0].health.state,
            SourceState::Down { reason } if reason.contains("shut down")
        ));
    }

    #[tokio::test]
    async fn sources_that_did_not_join_are_reported_as_noted() {
        struct Broken;
        #[async_trait]
        impl ToolSource for Broken {
            fn name(&self) -> &str {
                "broken"
            }
            async fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, ToolError> {
                Err(ToolError::Unavailable("it exited with status 1".to_owned()))
            }
        }
        let registry = Arc::new(ToolRegistry::new(
            Vec::new(),
            BTreeMap::new(),
            BTreeMap::new(),
        ));
        registry.note_source(
            "slow",
            SourceHealth {
                transport: SourceTransport::Http,
                state: SourceState::Starting,
                restarts: 0,
            },
        );
        let error = registry.add_source(Arc::new(Broken)).await.unwrap_err();
        assert!(
            error.to_string().contains("exited with status 1"),
            "{error}"
        );

        let statuses = registry.source_statuses();
        let names: Vec<&str> = statuses.iter().map(|status| status.name.as_str()).collect();
        assert_eq!(names, ["broken", "slow"]);
        assert!(matches!(
            &statuses[0].health.state,
            SourceState::Down { reason } if reason.contains("exited with status 1")
        ));
        assert_eq!(statuses[1].health.state, SourceState::Starting);
    }
}
