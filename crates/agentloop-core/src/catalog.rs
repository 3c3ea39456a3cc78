//! The tools an agent offers: each under its internal and provider-safe name, with its compiled
//! argument schema and its settings. A run works on one immutable snapshot.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::{Arc, OnceLock},
    time::Duration,
};

use serde_json::Value;

use crate::{
    client_tool::{ClientTool, ClientToolStub},
    llm::ToolSpec,
    names,
    settings::{AgentSettings, ToolSettings},
    tokens::TokenCounter,
    tool::Tool,
};

/// One tool of the catalog.
#[derive(Clone)]
pub struct CatalogEntry {
    pub tool: Arc<dyn Tool>,
    pub provider_name: String,
    pub settings: ToolSettings,
    validator: Option<jsonschema::Validator>,
    spec: Arc<ToolSpec>,
    /// A client tool of the run (`client_tool.rs`): its calls are answered by the client.
    pub client: bool,
}

impl CatalogEntry {
    pub fn name(&self) -> &str {
        &self.tool.info().name
    }

    /// Whether calls change data: the configured override, else the tool's annotations (MCP
    /// tools are mutating unless they say `readOnlyHint: true`, or `destructiveHint: true`
    /// overrides that).
    pub fn is_mutating(&self) -> bool {
        if let Some(mutating) = self.settings.mutating {
            return mutating;
        }
        let info = self.tool.info();
        info.destructive_hint == Some(true) || info.read_only_hint != Some(true)
    }

    /// Whether a call may run again with no further effect: read-only tools, and those the
    /// settings (`idempotent`) or the tool's annotations (`idempotentHint`) say are idempotent.
    pub fn is_idempotent(&self) -> bool {
        if !self.is_mutating() {
            return true;
        }
        self.settings
            .idempotent
            .or(self.tool.info().idempotent_hint)
            .unwrap_or(false)
    }

    /// The time limit of a call: the tool's own, else the agent's default.
    pub fn timeout(&self, agent: &AgentSettings) -> Duration {
        self.settings
            .timeout_s
            .map(Duration::from_secs_f64)
            .unwrap_or_else(|| agent.tool_timeout())
    }

    /// Checks arguments against the tool's JSON Schema; the error lists every problem with the
    /// path where it was found.
    pub fn validate(&self, arguments: &Value) -> Result<(), SchemaViolations> {
        match &self.validator {
            Some(validator) => check_schema(validator, arguments),
            None => Ok(()),
        }
    }

    /// The tool as offered to the model.
    pub fn spec(&self) -> Arc<ToolSpec> {
        self.spec.clone()
    }
}

/// The tokens `spec` takes in a request: its name, description and parameters' schema.
pub(crate) fn spec_tokens(counter: &dyn TokenCounter, spec: &ToolSpec) -> usize {
    counter.count(&spec.name)
        + counter.count(&spec.description)
        + counter.count(&spec.parameters.to_string())
}

/// Where a value does not fit a JSON Schema: every problem with the path where it was found, in
/// words a model can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct SchemaViolations(pub Vec<String>);

/// Checks `value` against a compiled JSON Schema.
pub(crate) fn check_schema(
    validator: &jsonschema::Validator,
    value: &Value,
) -> Result<(), SchemaViolations> {
    let problems: Vec<String> = validator
        .iter_errors(value)
        .map(|error| {
            let path = error.instance_path().to_string();
            if path.is_empty() {
                error.to_string()
            } else {
                format!("at {path}: {error}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(SchemaViolations(problems))
    }
}

/// The tools of an agent.
#[derive(Default)]
pub struct ToolCatalog {
    entries: Vec<CatalogEntry>,
    by_name: HashMap<String, usize>,
    by_provider_name: HashMap<String, usize>,
    warnings: Vec<String>,
    /// The tokens each tool's spec takes in a request, counted once for the catalog (by the
    /// counter whose address is kept with them) rather than for every run.
    spec_tokens: OnceLock<(usize, Arc<HashMap<String, usize>>)>,
}

impl ToolCatalog {
    /// Builds the catalog. Problems that do not stop the agent (a second tool with a name
    /// already taken, a schema that does not compile, settings for a tool that does not exist)
    /// are kept as warnings.
    pub fn new(tools: Vec<Arc<dyn Tool>>, settings: &BTreeMap<String, ToolSettings>) -> Self {
        Self::with_descriptions(tools, settings, &BTreeMap::new())
    }

    /// Like [`ToolCatalog::new`], extending each tool's description with its section of the
    /// tool descriptions file; a section for a tool that does not exist is a warning.
    pub fn with_descriptions(
        tools: Vec<Arc<dyn Tool>>,
        settings: &BTreeMap<String, ToolSettings>,
        descriptions: &BTreeMap<String, String>,
    ) -> Self {
        let mut catalog = ToolCatalog::default();
        let mut taken = HashSet::new();
        for tool in tools {
            let settings = settings.get(&tool.info().name).cloned().unwrap_or_default();
            let extra = descriptions.get(&tool.info().name).map(String::as_str);
            catalog.add(tool, settings, extra, &mut taken, false);
        }
        for name in settings.keys() {
            if !catalog.by_name.contains_key(name) {
                catalog.warnings.push(format!(
                    "[tools.\"{name}\"] in the configuration names a tool that no server offers"
                ));
            }
        }
        for name in descriptions.keys() {
            if !catalog.by_name.contains_key(name) {
                catalog.warnings.push(format!(
                    "the tool descriptions file has a section \"## {name}\" for a tool that no \
                     server offers"
                ));
            }
        }
        catalog
    }

    /// The tokens of each tool's spec, by internal name, as `counter` counts them: counted
    /// once per catalog (a catalog is made when the tools change), not for every run.
    pub(crate) fn spec_tokens(&self, counter: &dyn TokenCounter) -> Arc<HashMap<String, usize>> {
        // The counter's address tells whether the counts kept are its own.
        let counter_id = std::ptr::from_ref(counter).cast::<()>() as usize;
        let count = || {
            let counts = self
                .entries
                .iter()
                .map(|entry| (entry.name().to_string(), spec_tokens(counter, &entry.spec)))
                .collect();
            Arc::new(counts)
        };
        let (kept_for, counts) = self.spec_tokens.get_or_init(|| (counter_id, count()));
        if *kept_for == counter_id {
            counts.clone()
        } else {
            count()
        }
    }

    /// This catalog with the client tools of one run added (`client_tool.rs`): a client tool
    /// whose name is taken by one of the agent's tools is left out, with a warning.
    pub fn with_client_tools(&self, tools: &[ClientTool]) -> ToolCatalog {
        let mut catalog = ToolCatalog {
            entries: self.entries.clone(),
            by_name: self.by_name.clone(),
            by_provider_name: self.by_provider_name.clone(),
            warnings: self.warnings.clone(),
            spec_tokens: OnceLock::new(),
        };
        let mut taken: HashSet<String> = self.by_provider_name.keys().cloned().collect();
        for tool in tools {
            let stub: Arc<dyn Tool> = Arc::new(ClientToolStub::new(tool));
            catalog.add(stub, ToolSettings::default(), None, &mut taken, true);
        }
        catalog
    }

    /// Adds `tool` under a provider-safe name not `taken` yet; a second tool of a name is
    /// left out, with a warning.
    fn add(
        &mut self,
        tool: Arc<dyn Tool>,
        settings: ToolSettings,
        extra_description: Option<&str>,
        taken: &mut HashSet<String>,
        client: bool,
    ) {
        let info = tool.info();
        if self.by_name.contains_key(&info.name) {
            self.warnings.push(format!(
                "tool {} is offered twice; the second one is ignored",
                info.name
            ));
            return;
        }
        let validator = match jsonschema::validator_for(&info.input_schema) {
            Ok(validator) => Some(validator),
            Err(error) => {
                self.warnings.push(format!(
                    "the input schema of tool {} does not compile ({error}); its arguments \
                     will not be validated",
                    info.name
                ));
                None
            }
        };
        let provider_name = names::unique(&info.name, taken);
        let index = self.entries.len();
        self.by_name.insert(info.name.clone(), index);
        self.by_provider_name.insert(provider_name.clone(), index);
        let description = match extra_description {
            Some(extra) if info.description.is_empty() => extra.to_string(),
            Some(extra) => format!("{}\n\n{extra}", info.description),
            None => info.description.clone(),
        };
        let spec = Arc::new(ToolSpec {
            name: provider_name.clone(),
            description,
            parameters: Arc::new(info.input_schema.clone()),
        });
        self.entries.push(CatalogEntry {
            settings,
            tool,
            provider_name,
            validator,
            spec,
            client,
        });
    }

    pub fn entries(&self) -> &[CatalogEntry] {
        &self.entries
    }

    pub fn get(&self, name: &str) -> Option<&CatalogEntry> {
        self.by_name.get(name).map(|&index| &self.entries[index])
    }

    /// Finds the tool the model meant: by provider-safe name, else by internal name.
    pub fn resolve(&self, model_name: &str) -> Option<&CatalogEntry> {
        self.by_provider_name
            .get(model_name)
            .or_else(|| self.by_name.get(model_name))
            .map(|&index| &self.entries[index])
    }

    /// The provider-safe name of an internal name, also for tools no longer in the catalog
    /// (they may appear in history).
    pub fn provider_name(&self, name: &str) -> String {
        match self.get(name) {
            Some(entry) => entry.provider_name.clone(),
            None => names::sanitize(name),
        }
    }

    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl std::fmt::Debug for ToolCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|entry| entry.name()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{FnTool, ToolOutput};
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> Arc<dyn Tool> {
        Arc::new(FnTool::new(name, "test", schema, |_, _| async {
            Ok(ToolOutput::text("ok"))
        }))
    }

    fn number_schema() -> Value {
        json!({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]})
    }

    /// Counts words, and how many texts it was asked to count.
    #[derive(Default)]
    struct CountingCounter(std::sync::atomic::AtomicUsize);

    impl TokenCounter for CountingCounter {
        fn count(&self, text: &str) -> usize {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            text.split_whitespace().count()
        }
    }

    #[test]
    fn spec_tokens_are_counted_once_per_catalog_and_counter() {
        let catalog = ToolCatalog::new(
            vec![
                tool("math.add", number_schema()),
                tool("math.sub", json!({})),
            ],
            &BTreeMap::new(),
        );
        let counter = CountingCounter::default();
        let first = catalog.spec_tokens(&counter);
        let asked = counter.0.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(asked, 6, "name, description and schema of each tool");
        assert_eq!(first.len(), 2);
        let add = first["math.add"];
        assert_eq!(
            add,
            spec_tokens(&counter, &catalog.get("math.add").unwrap().spec)
        );

        let again = catalog.spec_tokens(&counter);
        assert!(
            Arc::ptr_eq(&first, &again),
            "the counts kept are given again"
        );
        assert_eq!(
            counter.0.load(std::sync::atomic::Ordering::Relaxed),
            asked + 3
        );

        // Another counter gets counts of its own, not the first one's.
        let other = CountingCounter::default();
        let others = catalog.spec_tokens(&other);
        assert!(!Arc::ptr_eq(&first, &others));
        assert_eq!(others["math.add"], add);
        assert_eq!(other.0.load(std::sync::atomic::Ordering::Relaxed), 6);
    }

    #[test]
    fn resolves_provider_and_internal_names() {
        let catalog = ToolCatalog::new(vec![tool("math.add", number_schema())], &BTreeMap::new());
        assert_eq!(catalog.resolve("math__add").unwrap().name(), "math.add");
        assert_eq!(catalog.resolve("math.add").unwrap().name(), "math.add");
        assert!(catalog.resolve("math__sub").is_none());
    }

    #[test]
    fn validation_names_the_problem_and_its_path() {
        let catalog = ToolCatalog::new(vec![tool("math.add", number_schema())], &BTreeMap::new());
        let entry = catalog.get("math.add").unwrap();
        assert_eq!(entry.validate(&json!({"a": 1})), Ok(()));
        let missing = entry.validate(&json!({})).unwrap_err().to_string();
        assert!(
            missing.contains("\"a\" is a required property"),
            "{missing}"
        );
        let wrong = entry
            .validate(&json!({"a": "one"}))
            .unwrap_err()
            .to_string();
        assert!(wrong.contains("/a"), "{wrong}");
    }

    #[test]
    fn problems_become_warnings_not_failures() {
        let mut settings = BTreeMap::new();
        settings.insert("nope.tool".to_string(), ToolSettings::default());
        let catalog = ToolCatalog::new(
            vec![
                tool("x.a", json!({"type": 12})),
                tool("x.a", json!({"type": "object"})),
            ],
            &settings,
        );
        assert_eq!(catalog.len(), 1);
        let warnings = catalog.warnings().join("\n");
        assert!(warnings.contains("does not compile"), "{warnings}");
        assert!(warnings.contains("offered twice"), "{warnings}");
        assert!(warnings.contains("nope.tool"), "{warnings}");
    }
}
