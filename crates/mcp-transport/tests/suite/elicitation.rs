//! Elicitation: a server's request reaches the `Elicitor`; the stock ones.

use super::*;

/// The message of a form or URL request.
fn message(request: &ElicitRequestParams) -> String {
    match request {
        ElicitRequestParams::FormElicitationParams { message, .. }
        | ElicitRequestParams::UrlElicitationParams { message, .. } => message.clone(),
        _ => String::new(),
    }
}

/// Remembers which server asked, and what, then declines.
#[derive(Default)]
struct Recorder(Mutex<Vec<(String, String)>>);

impl Elicitor for Recorder {
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'a, ElicitResult> {
        self.0
            .lock()
            .unwrap()
            .push((server.to_owned(), message(&request)));
        Box::pin(std::future::ready(ElicitResult::new(
            ElicitationAction::Decline,
        )))
    }
}

#[tokio::test]
async fn a_servers_elicitation_is_answered_by_the_elicitor() {
    let recorder = Arc::new(Recorder::default());
    let table: [(Arc<dyn Elicitor>, Value); 3] = [
        (
            Arc::new(AcceptDefaults),
            json!({"action": "accept", "content": {"age": 30, "name": "John"}}),
        ),
        (Arc::new(Decline), json!({"action": "decline"})),
        (recorder.clone(), json!({"action": "decline"})),
    ];
    for (elicitor, want) in table {
        let options = StartOptions::default().with_elicitor(elicitor);
        let servers = start(&[echo("asker", &[])], &options).await;
        let server = servers.get("asker").unwrap();
        let result = server.call_tool("ask", JsonObject::new(), CALL).await;
        servers.shutdown().await;
        let reply: Value = serde_json::from_str(&text(&result.unwrap())).unwrap();
        assert_eq!(reply, want);
    }
    assert_eq!(
        *recorder.0.lock().unwrap(),
        [("asker".to_owned(), "Who are you?".to_owned())]
    );
}

fn form(message: &str, properties: Value) -> ElicitRequestParams {
    serde_json::from_value(json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties},
    }))
    .unwrap()
}

fn url(message: &str, url: &str) -> ElicitRequestParams {
    serde_json::from_value(json!({
        "mode": "url",
        "message": message,
        "url": url,
        "elicitationId": "e-1",
    }))
    .unwrap()
}

#[tokio::test]
async fn the_stock_elicitors_answer_as_documented() {
    let with_defaults = form(
        "Sign up",
        json!({
            "name": {"type": "string", "default": "John"},
            "age": {"type": "integer", "default": 30},
            "subscribe": {"type": "boolean", "default": false},
            "email": {"type": "string"}
        }),
    );
    let without_defaults = form("Email?", json!({"email": {"type": "string"}}));
    let link = url("Log in", "https://example.com/login");
    let table: [(&str, &dyn Elicitor, &ElicitRequestParams, Value); 6] = [
        (
            "accept form",
            &AcceptDefaults,
            &with_defaults,
            json!({"action": "accept", "content": {"age": 30, "name": "John", "subscribe": false}}),
        ),
        (
            "accept form without defaults",
            &AcceptDefaults,
            &without_defaults,
            json!({"action": "accept", "content": {}}),
        ),
        (
            "accept url",
            &AcceptDefaults,
            &link,
            json!({"action": "decline"}),
        ),
        (
            "decline form",
            &Decline,
            &with_defaults,
            json!({"action": "decline"}),
        ),
        (
            "decline form without defaults",
            &Decline,
            &without_defaults,
            json!({"action": "decline"}),
        ),
        ("decline url", &Decline, &link, json!({"action": "decline"})),
    ];
    for (case, elicitor, request, want) in table {
        let got = elicitor.elicit("srv", request.clone()).await;
        assert_eq!(serde_json::to_value(&got).unwrap(), want, "{case}");
    }
}

/// Answers after `delay`, as a person filling in the form would.
struct Slow(Duration);

impl Elicitor for Slow {
    fn elicit<'a>(
        &'a self,
        _server: &'a str,
        _request: ElicitRequestParams,
    ) -> BoxFuture<'a, ElicitResult> {
        Box::pin(async move {
            tokio::time::sleep(self.0).await;
            ElicitResult::new(ElicitationAction::Decline)
        })
    }
}

#[tokio::test]
async fn the_call_timeout_stops_while_a_person_answers_a_form() {
    // A 300 ms call, answered 900 ms into its form: the answer comes back.
    let options = StartOptions::default().with_elicitor(Arc::new(Slow(Duration::from_millis(900))));
    let servers = start(&[echo("asker", &[])], &options).await;
    let server = servers.get("asker").unwrap();
    let result = server
        .call_tool("ask", JsonObject::new(), Duration::from_millis(300))
        .await;
    servers.shutdown().await;
    let reply: Value = serde_json::from_str(&text(&result.unwrap())).unwrap();
    assert_eq!(reply, json!({"action": "decline"}));
}
