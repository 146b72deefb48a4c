use std::time::Duration;

use core_agent_digest::{
    Billed, BoxFuture, INSTRUCTION, Summarizer, Summary, SummaryError, SummaryFailure,
    SummaryRequest, TokenUsage,
};
use serde_json::{Value, json};

/// A [`Summarizer`] for any OpenAI-compatible chat-completions endpoint.
pub struct OpenAiSummarizer {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
}

impl OpenAiSummarizer {
    /// A client for `base_url` (such as `https://api.example.com/v1`), with
    /// an optional bearer key; requests give up after `timeout`.
    pub fn new(
        base_url: &str,
        api_key: Option<String>,
        timeout: Duration,
    ) -> Result<OpenAiSummarizer, SummaryError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| SummaryError::Setup(format!("cannot build the HTTP client: {e}")))?;
        Ok(OpenAiSummarizer {
            client,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
        })
    }

    /// From `CORE_AGENT_LLM_BASE_URL` and `CORE_AGENT_LLM_API_KEY`; `None`
    /// when the base URL is not set.
    pub fn from_env(timeout: Duration) -> Option<Result<OpenAiSummarizer, SummaryError>> {
        let base = std::env::var("CORE_AGENT_LLM_BASE_URL")
            .ok()
            .filter(|b| !b.is_empty())?;
        let key = std::env::var("CORE_AGENT_LLM_API_KEY")
            .ok()
            .filter(|k| !k.is_empty());
        Some(OpenAiSummarizer::new(&base, key, timeout))
    }

    async fn call(&self, request: SummaryRequest<'_>) -> Result<Summary, SummaryFailure> {
        let body = json!({
            "model": request.model,
            "messages": [
                {"role": "system", "content": INSTRUCTION},
                {"role": "user", "content": request.user_message()},
            ],
            "max_tokens": request.max_output_tokens,
        });
        let mut post = self
            .client
            .post(format!("{}/chat/completions", self.base_url))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(key) = &self.api_key {
            post = post.bearer_auth(key);
        }
        let response = post.send().await.map_err(|e| SummaryFailure {
            // A connection never made sent nothing to bill; past that, the
            // provider may have run the request.
            billed: if e.is_connect() {
                Billed::Nothing
            } else {
                Billed::Unknown
            },
            error: SummaryError::Transport(format!("it did not answer: {e}")),
        })?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| SummaryFailure {
            error: SummaryError::Transport(format!("the answer broke off: {e}")),
            billed: Billed::Unknown,
        })?;
        let value: Option<Value> = serde_json::from_slice(&bytes).ok();
        let usage = value.as_ref().and_then(usage_of);
        if !status.is_success() {
            // An error answer bills what its `usage` says, else nothing.
            return Err(SummaryFailure {
                error: SummaryError::Http {
                    status: status.as_u16(),
                },
                billed: usage.map_or(Billed::Nothing, Billed::Reported),
            });
        }
        // A success without `usage` was billed, but for what is unknown.
        let billed = usage.map_or(Billed::Unknown, Billed::Reported);
        let Some(value) = value else {
            return Err(SummaryFailure {
                error: SummaryError::BadAnswer("not JSON".to_owned()),
                billed,
            });
        };
        let text = value
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| SummaryFailure {
                error: SummaryError::BadAnswer("no choices[0].message.content".to_owned()),
                billed,
            })?;
        Ok(Summary {
            text: text.to_owned(),
            billed,
        })
    }
}

/// The `usage` of an OpenAI-compatible answer (an error answer's too), when
/// it has one: `prompt_tokens`, `prompt_tokens_details.cached_tokens`,
/// `completion_tokens`.
fn usage_of(answer: &Value) -> Option<TokenUsage> {
    let usage = answer.get("usage")?.as_object()?;
    let tokens = |p: &str| usage.get(p).and_then(Value::as_u64);
    let input_tokens = tokens("prompt_tokens");
    let output_tokens = tokens("completion_tokens");
    if input_tokens.is_none() && output_tokens.is_none() {
        return None;
    }
    let cached_input_tokens = usage
        .get("prompt_tokens_details")
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Some(TokenUsage {
        input_tokens: input_tokens.unwrap_or(0),
        cached_input_tokens,
        output_tokens: output_tokens.unwrap_or(0),
    })
}

impl Summarizer for OpenAiSummarizer {
    fn summarize<'a>(
        &'a self,
        request: SummaryRequest<'a>,
    ) -> BoxFuture<'a, Result<Summary, SummaryFailure>> {
        Box::pin(self.call(request))
    }
}

impl std::fmt::Debug for OpenAiSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiSummarizer")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::mpsc;

    use super::*;

    /// A loopback chat-completions stub: answers each request with the next
    /// `(status line, body)` of `answers`, and sends each request's body
    /// back to the test.
    fn stub(answers: Vec<(&'static str, String)>) -> (String, mpsc::Receiver<Value>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for (status, body) in answers {
                let (mut stream, _) = listener.accept().unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let (mut line, mut length) = (String::new(), 0usize);
                while reader.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                    line.clear();
                }
                let mut request = vec![0; length];
                reader.read_exact(&mut request).unwrap();
                let _ = tx.send(serde_json::from_slice(&request).unwrap());
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        (url, rx)
    }

    #[tokio::test]
    async fn the_client_reads_cached_tokens_and_what_a_failure_billed() {
        let answers = vec![
            (
                "200 OK",
                json!({"choices": [{"message": {"content": "short"}}],
                       "usage": {"prompt_tokens": 1000, "completion_tokens": 20,
                                 "prompt_tokens_details": {"cached_tokens": 768}}})
                .to_string(),
            ),
            (
                "500 Internal Server Error",
                json!({"error": {"message": "overloaded"},
                       "usage": {"prompt_tokens": 1000, "completion_tokens": 3}})
                .to_string(),
            ),
            (
                "429 Too Many Requests",
                json!({"error": "slow down"}).to_string(),
            ),
            (
                "200 OK",
                json!({"choices": [{"message": {"content": "no usage"}}]}).to_string(),
            ),
        ];
        let (url, bodies) = stub(answers);
        let client = OpenAiSummarizer::new(&url, None, Duration::from_secs(60)).unwrap();
        let payload = "a payload ".repeat(100);
        let request = SummaryRequest::new(&payload, "m", 500);

        let summary = client.summarize(request).await.unwrap();
        assert_eq!(summary.text, "short");
        assert_eq!(
            summary.billed,
            Billed::Reported(TokenUsage {
                input_tokens: 1000,
                cached_input_tokens: 768,
                output_tokens: 20,
            })
        );
        // What the endpoint was sent: the instruction, the payload, the bound.
        let sent = bodies.recv().unwrap();
        assert_eq!(sent["max_tokens"], 125);
        assert_eq!(sent["messages"][0]["content"], INSTRUCTION);
        assert_eq!(sent["messages"][1]["content"], request.user_message());

        let failure = client.summarize(request).await.unwrap_err();
        assert_eq!(failure.error, SummaryError::Http { status: 500 });
        assert_eq!(
            failure.billed,
            Billed::Reported(TokenUsage {
                input_tokens: 1000,
                cached_input_tokens: 0,
                output_tokens: 3,
            })
        );
        let failure = client.summarize(request).await.unwrap_err();
        assert_eq!(
            (failure.error, failure.billed),
            (SummaryError::Http { status: 429 }, Billed::Nothing)
        );
        let summary = client.summarize(request).await.unwrap();
        assert_eq!(summary.billed, Billed::Unknown, "answered, usage unknown");

        // Nobody listening: nothing was sent, so nothing billed.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", closed.local_addr().unwrap());
        drop(closed);
        let client = OpenAiSummarizer::new(&url, None, Duration::from_secs(60)).unwrap();
        let failure = client.summarize(request).await.unwrap_err();
        assert_eq!(failure.billed, Billed::Nothing, "{failure}");
    }
}
