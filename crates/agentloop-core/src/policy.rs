//! What a run may do with its tools: read-only contexts offer no tool that changes data,
//! workflows offer only their allowlist, and mutating calls are rate limited per entity.

use std::{collections::BTreeMap, fmt, num::NonZeroU32, str::FromStr, sync::Arc, time::Duration};

use governor::{
    DefaultKeyedRateLimiter, Quota, RateLimiter,
    clock::{Clock, DefaultClock},
};
use serde::{Deserialize, Serialize};

use crate::{catalog::CatalogEntry, settings::InvalidSetting};

/// The user a run belongs to when the request names none.
pub const DEFAULT_USER: &str = "local";

/// `[policy]` of agentloop.toml.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicySettings {
    /// How many calls of mutating tools one entity may make, e.g. `"10/minute"`.
    pub mutation_rate: Option<MutationRate>,
}

/// `[workflows.NAME]`: the tools a run of that workflow is offered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkflowSettings {
    /// Internal tool names, or patterns ending in `*` (`"projects.*"`).
    pub tools: Vec<String>,
}

impl WorkflowSettings {
    pub fn allows(&self, tool: &str) -> bool {
        self.tools
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => tool.starts_with(prefix),
                None => pattern == tool,
            })
    }
}

/// A rate such as `10/minute`: a burst of `count` calls, then one more each `per / count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MutationRate {
    pub count: NonZeroU32,
    pub per: Duration,
}

impl FromStr for MutationRate {
    type Err = InvalidSetting;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            InvalidSetting::new(
                "policy.mutation_rate",
                format!(
                    "policy.mutation_rate must look like \"10/minute\" (a count, then second, \
                     minute, hour or day), got {text:?}"
                ),
            )
        };
        let (count, unit) = text.split_once('/').ok_or_else(invalid)?;
        let count: u32 = count.trim().parse().map_err(|_| invalid())?;
        let count = NonZeroU32::new(count).ok_or_else(invalid)?;
        let seconds = match unit.trim() {
            "s" | "sec" | "second" => 1,
            "m" | "min" | "minute" => 60,
            "h" | "hour" => 3_600,
            "d" | "day" => 86_400,
            _ => return Err(invalid()),
        };
        Ok(MutationRate {
            count,
            per: Duration::from_secs(seconds),
        })
    }
}

impl TryFrom<String> for MutationRate {
    type Error = InvalidSetting;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<MutationRate> for String {
    fn from(rate: MutationRate) -> String {
        rate.to_string()
    }
}

impl fmt::Display for MutationRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "second",
            60 => "minute",
            3_600 => "hour",
            _ => "day",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

/// Counts the mutating calls of each entity, in this process.
pub struct MutationLimiter {
    rate: MutationRate,
    limiter: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
}

impl MutationLimiter {
    pub fn new(rate: MutationRate) -> Self {
        let quota = Quota::with_period(rate.per / rate.count.get())
            .unwrap_or_else(|| Quota::per_second(rate.count))
            .allow_burst(rate.count);
        Self {
            rate,
            limiter: RateLimiter::keyed(quota),
            clock: DefaultClock::default(),
        }
    }

    pub fn rate(&self) -> MutationRate {
        self.rate
    }

    /// Takes one call of `key`'s budget, or says how long until one is free.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        self.limiter
            .check_key(&key.to_string())
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

impl fmt::Debug for MutationLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MutationLimiter")
            .field("rate", &self.rate.to_string())
            .finish()
    }
}

/// Whose budget a run's mutating calls take: the entity, else the user, else the local user.
pub(crate) fn limit_key(entity_id: Option<&str>, user_id: Option<&str>) -> String {
    entity_id.or(user_id).unwrap_or(DEFAULT_USER).to_string()
}

/// The rules of one run.
#[derive(Debug, Clone, Default)]
pub struct RunPolicy {
    pub read_only: bool,
    /// The workflow the run belongs to, and its allowlist.
    pub workflow: Option<(String, WorkflowSettings)>,
    pub limiter: Option<Arc<MutationLimiter>>,
    /// Whose budget mutating calls take: the entity, else the user.
    pub limit_key: String,
    /// Set in a sub-agent's run: its name and its allowlist (empty: every tool but agents).
    pub agent: Option<(String, WorkflowSettings)>,
}

/// A run's context names a workflow the agent does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown workflow {name:?} (known: {})", list_or_none(known))]
pub struct UnknownWorkflow {
    pub name: String,
    /// The workflows there are.
    pub known: Vec<String>,
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// Why the policy refuses a call.
pub struct Refusal {
    pub error: String,
    pub hint: &'static str,
}

impl RunPolicy {
    /// The policy of a run for `workflow` (which must exist in `workflows`).
    pub fn for_run(
        read_only: bool,
        workflow: Option<&str>,
        workflows: &BTreeMap<String, WorkflowSettings>,
        limiter: Option<Arc<MutationLimiter>>,
        limit_key: String,
    ) -> Result<RunPolicy, UnknownWorkflow> {
        let workflow = match workflow {
            None => None,
            Some(name) => match workflows.get(name) {
                Some(settings) => Some((name.to_string(), settings.clone())),
                None => {
                    return Err(UnknownWorkflow {
                        name: name.to_string(),
                        known: workflows.keys().cloned().collect(),
                    });
                }
            },
        };
        Ok(RunPolicy {
            read_only,
            workflow,
            limiter,
            limit_key,
            agent: None,
        })
    }

    /// Whether the run may offer and call this tool; why not, when it may not.
    pub fn refusal(&self, entry: &CatalogEntry) -> Option<Refusal> {
        let name = entry.name();
        if let Some((workflow, settings)) = &self.workflow
            && !settings.allows(name)
        {
            return Some(Refusal {
                error: format!("{name} is not one of the tools of the workflow {workflow:?}"),
                hint: "Use the tools you are offered, or tell the user this cannot be done here.",
            });
        }
        if let Some((agent, allowlist)) = &self.agent {
            if name.starts_with(crate::names::AGENT_TOOL_PREFIX) {
                return Some(Refusal {
                    error: format!("the {agent} agent cannot hand work to other agents"),
                    hint: "Do the task with your own tools.",
                });
            }
            if !allowlist.tools.is_empty() && !allowlist.allows(name) {
                return Some(Refusal {
                    error: format!("{name} is not one of the tools of the {agent} agent"),
                    hint: "Use the tools you are offered.",
                });
            }
        }
        if self.read_only && entry.is_mutating() {
            return Some(Refusal {
                error: format!("this project is read-only: {name} changes data, so it was not run"),
                hint: "Tell the user the project is read-only and this change cannot be made \
                       here; offer what can be done with the read-only tools.",
            });
        }
        None
    }

    /// Takes a mutating call from the budget; the refusal says when to try again.
    pub fn take_mutation(&self, entry: &CatalogEntry) -> Option<Refusal> {
        let limiter = self.limiter.as_ref()?;
        if !entry.is_mutating() {
            return None;
        }
        let wait = limiter.check(&self.limit_key).err()?;
        let seconds = wait.as_secs_f64().ceil().max(1.0);
        Some(Refusal {
            error: format!(
                "rate limit reached: at most {} calls of tools that change data for {}; try again \
                 in {seconds} s",
                limiter.rate(),
                self.limit_key
            ),
            hint: "Do not retry right away. Tell the user the change was not made because of the \
                   rate limit, and when it can be tried again.",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_print() {
        let rate: MutationRate = "10/minute".parse().unwrap();
        assert_eq!(rate.count.get(), 10);
        assert_eq!(rate.per, Duration::from_secs(60));
        assert_eq!(rate.to_string(), "10/minute");
        assert_eq!(
            "3/s".parse::<MutationRate>().unwrap().per,
            Duration::from_secs(1)
        );
        for bad in ["10", "0/minute", "x/minute", "10/fortnight", ""] {
            let error = bad.parse::<MutationRate>().unwrap_err();
            assert!(
                error.message.contains("policy.mutation_rate"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn the_limiter_allows_the_burst_then_says_when() {
        let limiter = MutationLimiter::new("2/minute".parse().unwrap());
        assert_eq!(limiter.check("a"), Ok(()));
        assert_eq!(limiter.check("a"), Ok(()));
        let wait = limiter.check("a").unwrap_err();
        assert!(
            wait > Duration::from_secs(20) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        assert_eq!(
            limiter.check("b"),
            Ok(()),
            "entities have budgets of their own"
        );
    }

    #[test]
    fn workflow_patterns_match_names_and_prefixes() {
        let workflow = WorkflowSettings {
            tools: vec!["kb.search".into(), "projects.*".into()],
        };
        assert!(workflow.allows("kb.search"));
        assert!(workflow.allows("projects.update"));
        assert!(!workflow.allows("kb.delete"));
        assert!(!workflow.allows("project.update"));
    }

    #[test]
    fn a_sub_agent_is_held_to_its_allowlist_and_never_calls_agents() {
        use crate::{catalog::ToolCatalog, tool::FnTool};
        let tools: Vec<Arc<dyn crate::tool::Tool>> = ["kb.search", "kb.delete", "agent.other"]
            .into_iter()
            .map(|name| {
                Arc::new(FnTool::new(name, "", serde_json::json!({}), |_, _| async {
                    Ok(crate::tool::ToolOutput::text(""))
                })) as Arc<dyn crate::tool::Tool>
            })
            .collect();
        let catalog = ToolCatalog::new(tools, &BTreeMap::new());
        let refused = |policy: &RunPolicy, name: &str| {
            policy
                .refusal(catalog.get(name).unwrap())
                .map(|refusal| refusal.error)
        };
        let mut policy = RunPolicy::default();
        assert_eq!(refused(&policy, "agent.other"), None);
        policy.agent = Some((
            "researcher".into(),
            WorkflowSettings {
                tools: vec!["kb.search".into()],
            },
        ));
        assert_eq!(refused(&policy, "kb.search"), None);
        assert!(
            refused(&policy, "kb.delete")
                .unwrap()
                .contains("not one of the tools")
        );
        assert!(
            refused(&policy, "agent.other")
                .unwrap()
                .contains("other agents")
        );
        policy.agent = Some(("researcher".into(), WorkflowSettings::default()));
        assert_eq!(
            refused(&policy, "kb.delete"),
            None,
            "no allowlist: every tool"
        );
        assert!(refused(&policy, "agent.other").is_some());
    }

    #[test]
    fn an_unknown_workflow_is_refused_with_the_known_ones() {
        let mut workflows = BTreeMap::new();
        workflows.insert("triage".to_string(), WorkflowSettings::default());
        let error = RunPolicy::for_run(false, Some("trige"), &workflows, None, String::new())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("\"trige\"") && error.contains("triage"),
            "{error}"
        );
    }
}
