//! A scripted OpenAI-compatible server as a process of its own, for benchmarks and for fuzzing
//! the HTTP API: every request gets an answer after a fixed latency; with `--tool-calls K`, the
//! first K replies of a conversation call a tool; with `--answer-bytes N`, the answer is the
//! `--answer` text repeated (space-separated) to N bytes, for answers larger than an argument
//! can be.
//!
//! ```sh
//! agentloop-scripted-llm --listen 127.0.0.1:0 --latency-ms 200 --tool-calls 1 --tool test__echo
//! ```
//! prints `http://ADDRESS/v1` on its first line of stdout, then serves until killed.

use std::{io::Write, time::Duration};

use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use serde_json::{Value, json};

struct Options {
    listen: String,
    latency: Duration,
    tool_calls: usize,
    tool: String,
    answer: String,
    answer_bytes: usize,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        listen: "127.0.0.1:0".into(),
        latency: Duration::ZERO,
        tool_calls: 0,
        tool: "test__echo".into(),
        answer: "Done.".into(),
        answer_bytes: 0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--listen" => options.listen = value()?,
            "--latency-ms" => {
                let ms = value()?
                    .parse()
                    .map_err(|_| "--latency-ms takes milliseconds")?;
                options.latency = Duration::from_millis(ms);
            }
            "--tool-calls" => {
                options.tool_calls = value()?.parse().map_err(|_| "--tool-calls takes a count")?
            }
            "--tool" => options.tool = value()?,
            "--answer" => options.answer = value()?,
            "--answer-bytes" => {
                options.answer_bytes = value()?
                    .parse()
                    .map_err(|_| "--answer-bytes takes a size in bytes")?
            }
            "--help" | "-h" => {
                return Err(
                    "usage: agentloop-scripted-llm [--listen ADDR] [--latency-ms N] \
                            [--tool-calls K] [--tool NAME] [--answer TEXT] \
                            [--answer-bytes N]"
                        .into(),
                );
            }
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let Options {
        listen,
        latency,
        tool_calls,
        tool,
        answer,
        answer_bytes,
    } = options;
    let answer = repeated(&answer, answer_bytes);
    let llm = ScriptedLlm::start_on(&listen, move |request: &Value| {
        let calls_so_far = request["messages"]
            .as_array()
            .map(|messages| {
                messages
                    .iter()
                    .filter(|m| m["tool_calls"].is_array())
                    .count()
            })
            .unwrap_or(0);
        let reply = if calls_so_far < tool_calls {
            Reply::tool_call(&tool, json!({"text": format!("call {calls_so_far}")}))
        } else {
            Reply::text(answer.clone())
        };
        reply.with_delay(latency)
    })
    .await;
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "{}", llm.base_url());
    let _ = stdout.flush();
    std::future::pending::<()>().await;
}

/// `text` repeated, space-separated, cut to `bytes` (at a char boundary); `text` itself when
/// `bytes` is 0 or `text` is empty.
fn repeated(text: &str, bytes: usize) -> String {
    if bytes == 0 || text.is_empty() {
        return text.to_string();
    }
    let mut answer = String::with_capacity(bytes + text.len() + 1);
    while answer.len() < bytes {
        answer.push_str(text);
        answer.push(' ');
    }
    let mut cut = bytes;
    while !answer.is_char_boundary(cut) {
        cut -= 1;
    }
    answer.truncate(cut);
    answer
}
