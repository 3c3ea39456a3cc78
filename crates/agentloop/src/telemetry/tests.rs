use super::*;

fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        vars.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.to_string())
    }
}

#[test]
fn no_endpoint_anywhere_means_no_traces() {
    let settings = TelemetrySettings::default();
    assert_eq!(settings.export(env(&[])), Ok(None));
}

#[test]
fn the_file_endpoint_gets_the_traces_path_and_the_environment_overrides_it() {
    let settings = TelemetrySettings {
        otlp_endpoint: Some("http://collector:4318/".to_string()),
        capture_content: true,
        service_name: "shop".to_string(),
    };
    let export = settings.export(env(&[])).unwrap().unwrap();
    assert_eq!(export.traces_url, "http://collector:4318/v1/traces");
    assert_eq!(export.service_name, "shop");
    assert!(export.capture_content);

    let vars = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://other:4318"),
        ("OTEL_SERVICE_NAME", "shop-eu"),
    ];
    let export = settings.export(env(&vars)).unwrap().unwrap();
    assert_eq!(export.traces_url, "http://other:4318/v1/traces");
    assert_eq!(export.service_name, "shop-eu");

    // The signal's own variable is a full URL, used as it is.
    let vars = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://other:4318"),
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://traces:9999/in",
        ),
    ];
    let export = TelemetrySettings::default()
        .export(env(&vars))
        .unwrap()
        .unwrap();
    assert_eq!(export.traces_url, "http://traces:9999/in");
    assert_eq!(export.service_name, "agentloop");
}

#[test]
fn a_protocol_other_than_http_protobuf_is_refused_with_its_variable() {
    let vars = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ];
    let error = TelemetrySettings::default().export(env(&vars)).unwrap_err();
    assert_eq!(error.key, "OTEL_EXPORTER_OTLP_PROTOCOL");
    assert!(error.message.contains("http/protobuf"), "{}", error.message);
    let vars = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
    ];
    assert!(TelemetrySettings::default().export(env(&vars)).is_ok());
}

#[test]
fn an_endpoint_that_is_not_a_url_is_refused() {
    let settings = TelemetrySettings {
        otlp_endpoint: Some("collector:4318".to_string()),
        ..TelemetrySettings::default()
    };
    let error = settings.export(env(&[])).unwrap_err();
    assert_eq!(error.key, "telemetry.otlp_endpoint");
}
