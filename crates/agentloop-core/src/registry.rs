//! The tools of an agent over time: built-in tools, plus the tools of each source, which may
//! join late (a slow MCP server) or change (`tools/list_changed`). Every run works on the
//! catalog as it was when the run started; later changes reach later runs.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError, RwLock},
};

use crate::{
    catalog::ToolCatalog,
    settings::ToolSettings,
    tool::{Tool, ToolSource},
};

/// What the catalog is built from.
struct Parts {
    builtins: Vec<Arc<dyn Tool>>,
    /// The tools of each source, by source name.
    sources: BTreeMap<String, Vec<Arc<dyn Tool>>>,
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
        let mut parts = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
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
    /// changed (for as long as it can say so). Returns the catalog with them, or why the source
    /// could not be listed.
    pub async fn add_source(
        self: &Arc<Self>,
        source: Arc<dyn ToolSource>,
    ) -> Result<Arc<ToolCatalog>, String> {
        let changes = source.changes();
        let tools = source
            .tools()
            .await
            .map_err(|error| format!("tool source {} is left out: {error}", source.name()))?;
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
                    match source.tools().await {
                        Ok(tools) => {
                            let catalog = registry.set_source_tools(source.name(), tools);
                            tracing::info!(
                                source = source.name(),
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

    use super::*;
    use crate::tool::{FnTool, ToolError, ToolOutput};

    fn tool(name: &str) -> Arc<dyn Tool> {
        Arc::new(FnTool::new(
            name,
            "t",
            json!({"type": "object"}),
            |_, _| async { Ok(ToolOutput::text("ok")) },
        ))
    }

    /// A source whose tools are set by the test, with a change counter.
    struct Changing {
        tools: Mutex<Vec<&'static str>>,
        version: watch::Sender<u64>,
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

        let source = Arc::new(Changing {
            tools: Mutex::new(vec!["remote.a"]),
            version: watch::Sender::new(0),
        });
        registry.add_source(source.clone()).await.unwrap();
        assert_eq!(names(&registry.catalog()), ["local.clock", "remote.a"]);
        assert_eq!(
            names(&before),
            ["local.clock"],
            "a snapshot taken earlier does not change"
        );

        *source.tools.lock().unwrap() = vec!["remote.a", "remote.b"];
        source.version.send_modify(|v| *v += 1);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while registry.catalog().len() < 3 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the change never landed"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(
            names(&registry.catalog()),
            ["local.clock", "remote.a", "remote.b"]
        );
    }
}
