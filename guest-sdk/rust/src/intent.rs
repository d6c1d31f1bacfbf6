//! Reading intent documents: `spec` into your own serde types, and errors and diagnostics that
//! name the document (`Kind/name`) and the field (`spec.routes[2].timeout`).
//!
//! Where the document came from (`services.yaml#2`): the host appends it to every error that
//! names a document, so error messages leave it out; diagnostics, which the host shows as
//! they are, carry it at the end of their message.

use std::fmt;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::{Diagnostic, IntentDocument, PluginError, Severity};

/// The parts of a document a plugin reads; `kind` and `metadata` are the host's (it checked
/// them already) and are skipped.
#[derive(Deserialize)]
struct Envelope<T> {
    #[serde(default = "Option::default")]
    spec: Option<T>,
}

impl IntentDocument {
    /// `Kind/name`, or `Kind/namespace/name` for a namespaced document (the host hands its
    /// name as `namespace/name`): how resources, errors and diagnostics name this document.
    pub fn id(&self) -> String {
        let mut id = String::with_capacity(self.kind.len() + 1 + self.name.len());
        id.push_str(&self.kind);
        id.push('/');
        id.push_str(&self.name);
        id
    }

    /// `metadata.namespace`, for a namespaced document.
    pub fn namespace(&self) -> Option<&str> {
        self.name.split_once('/').map(|(ns, _)| ns)
    }

    /// `metadata.generation`, when the document carries one (a Kubernetes object as the API
    /// server printed it): what a status reports back as `observedGeneration`.
    pub fn generation(&self) -> Option<i64> {
        #[derive(Deserialize)]
        struct Meta {
            #[serde(default)]
            metadata: Option<Generation>,
        }
        #[derive(Deserialize)]
        struct Generation {
            #[serde(default)]
            generation: Option<i64>,
        }
        serde_json::from_str::<Meta>(&self.json).ok()?.metadata?.generation
    }

    /// `metadata.name` alone, without the namespace.
    pub fn local_name(&self) -> &str {
        self.name.split_once('/').map_or(&self.name, |(_, n)| n)
    }

    /// Deserializes the whole document into `T`: for Kubernetes objects whose body is not (only)
    /// in `spec`, such as an EndpointSlice's `endpoints` or a Secret's `data`. Errors name the
    /// field as [`spec`](Self::spec)'s do.
    pub fn body<T: DeserializeOwned>(&self) -> Result<T, PluginError> {
        // Tracking the path costs as much as the parse: it is worked out only for an error.
        if let Ok(body) = serde_json::from_str(&self.json) {
            return Ok(body);
        }
        let mut de = serde_json::Deserializer::from_str(&self.json);
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let message = without_position(e.inner());
            match e.path().iter().next() {
                Some(_) => self.error(e.path().to_string(), message),
                None => self.error_here(message),
            }
        })
    }

    /// Deserializes the document's `spec` (an absent or `null` spec reads as `{}`) into `T`.
    ///
    /// The error names this document, the path of the offending field (`spec.hosts[0].port`)
    /// and serde's message. Use `#[serde(deny_unknown_fields)]` on `T` so a misspelt field is an
    /// error rather than silently ignored.
    pub fn spec<T: DeserializeOwned>(&self) -> Result<T, PluginError> {
        // As in `body`: the path is tracked only to name the field of an error.
        if let Ok(Envelope { spec: Some(spec) }) = serde_json::from_str::<Envelope<T>>(&self.json) {
            return Ok(spec);
        }
        let mut de = serde_json::Deserializer::from_str(&self.json);
        let parsed: Result<Envelope<T>, _> = serde_path_to_error::deserialize(&mut de);
        match parsed {
            Ok(Envelope { spec: Some(spec) }) => Ok(spec),
            Ok(Envelope { spec: None }) => {
                let mut de = serde_json::Deserializer::from_str("{}");
                serde_path_to_error::deserialize(&mut de).map_err(|e| {
                    let field = match e.path().iter().next() {
                        None => "spec".to_owned(),
                        Some(_) => format!("spec.{}", e.path()),
                    };
                    self.error(field, without_position(e.inner()))
                })
            }
            Err(e) => {
                let field = e.path().iter().next().map(|_| e.path().to_string());
                let message = without_position(e.inner());
                Err(match field {
                    Some(field) => self.error(field, message),
                    None => self.error_here(message),
                })
            }
        }
    }

    /// A [`PluginError`] about `field` of this document (`spec.routes[1].backends`). The host
    /// shows it as `Kind/name field <field>: <message> (in <origin>)`.
    pub fn error(&self, field: impl Into<String>, message: impl fmt::Display) -> PluginError {
        PluginError::new(message.to_string()).with_document(self.id()).with_field(field)
    }

    /// A [`PluginError`] about this document as a whole.
    pub fn error_here(&self, message: impl fmt::Display) -> PluginError {
        PluginError::new(message.to_string()).with_document(self.id())
    }

    /// A warning about `field` of this document, for
    /// [`TranslateResponse::diagnostics`](crate::TranslateResponse); the message ends with the
    /// document's origin.
    pub fn warning(&self, field: impl Into<String>, message: impl fmt::Display) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            message: self.located(message),
            document: Some(self.id()),
            field: Some(field.into()),
        }
    }

    fn located(&self, message: impl fmt::Display) -> String {
        if self.origin.is_empty() { message.to_string() } else { format!("{message} ({})", self.origin) }
    }
}

/// serde_json appends ` at line L column C` of the JSON the host re-serialised: meaningless to
/// whoever wrote the YAML, so it goes.
fn without_position(e: &serde_json::Error) -> String {
    let mut message = e.to_string();
    if let Some(at) = message.rfind(" at line ").filter(|_| e.line() > 0) {
        message.truncate(at);
    }
    message
}

impl PluginError {
    /// An error with a message only; add where it is with [`with_document`](Self::with_document)
    /// and [`with_field`](Self::with_field), or start from [`IntentDocument::error`].
    pub fn new(message: impl Into<String>) -> Self {
        PluginError { message: message.into(), document: None, field: None }
    }

    /// Names the intent document at fault (`Kind/name`).
    pub fn with_document(mut self, document: impl Into<String>) -> Self {
        self.document = Some(document.into());
        self
    }

    /// Names the field at fault (`spec.routes[2].timeout`).
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Spec {
        #[serde(default)]
        routes: Vec<Route>,
        #[serde(default)]
        labels: BTreeMap<String, String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Route {
        path_prefix: String,
        timeout_ms: Option<u32>,
    }

    fn doc(json: &str) -> IntentDocument {
        IntentDocument {
            kind: "HttpService".into(),
            name: "web".into(),
            origin: "web.yaml#2".into(),
            json: json.into(),
        }
    }

    #[test]
    fn spec_parses_and_skips_kind_and_metadata() {
        let d = doc(r#"{"kind":"HttpService","metadata":{"name":"web","labels":{"a":"b"}},
                "spec":{"routes":[{"pathPrefix":"/"}]}}"#);
        let spec: Spec = d.spec().unwrap();
        assert_eq!(spec.routes[0].path_prefix, "/");
        assert_eq!(d.id(), "HttpService/web");
    }

    #[test]
    fn namespaced_documents_and_bodies_outside_spec() {
        #[derive(Debug, Deserialize)]
        struct Slice {
            #[allow(dead_code, reason = "read only to check that the document deserializes")]
            endpoints: Vec<BTreeMap<String, Vec<String>>>,
        }
        let d = IntentDocument {
            kind: "EndpointSlice".into(),
            name: "infra/web-1".into(),
            origin: "k8s.yaml#1".into(),
            json: r#"{"kind":"EndpointSlice","endpoints":[{"addresses":["10.0.0.1"]},{"addresses":[1]}]}"#.into(),
        };
        assert_eq!(
            (d.id().as_str(), d.namespace(), d.local_name()),
            ("EndpointSlice/infra/web-1", Some("infra"), "web-1")
        );
        let e = d.body::<Slice>().unwrap_err();
        assert_eq!(
            (e.document.as_deref(), e.field.as_deref()),
            (Some("EndpointSlice/infra/web-1"), Some("endpoints[1].addresses[0]"))
        );
        assert_eq!((doc("{}").namespace(), doc("{}").local_name()), (None, "web"));
    }

    #[test]
    fn absent_or_null_spec_reads_as_empty() {
        for json in [
            r#"{"kind":"HttpService","metadata":{"name":"web"}}"#,
            r#"{"kind":"HttpService","metadata":{"name":"web"},"spec":null}"#,
        ] {
            let spec: Spec = doc(json).spec().unwrap();
            assert!(spec.routes.is_empty());
        }
    }

    #[test]
    fn errors_name_document_field_and_origin() {
        let d = doc(r#"{"kind":"HttpService","metadata":{"name":"web"},
                "spec":{"routes":[{"pathPrefix":"/"},{"pathPrefix":"/a","timeoutMs":"soon"}]}}"#);
        let e = d.spec::<Spec>().unwrap_err();
        assert_eq!(e.document.as_deref(), Some("HttpService/web"));
        assert_eq!(e.field.as_deref(), Some("spec.routes[1].timeoutMs"));
        assert!(e.message.contains("invalid type"), "{}", e.message);
        assert!(!e.message.contains("line"), "{}", e.message);
        assert!(!e.message.contains("web.yaml"), "the host adds the origin: {}", e.message);
    }

    #[test]
    fn unknown_and_missing_fields_are_located() {
        let d = doc(r#"{"spec":{"routes":[{"pathPrefix":"/","tiemout":1}]}}"#);
        let e = d.spec::<Spec>().unwrap_err();
        assert_eq!(e.field.as_deref(), Some("spec.routes[0].tiemout"));
        assert!(e.message.contains("unknown field `tiemout`"), "{}", e.message);

        let e = doc(r#"{"spec":{"routes":[{}]}}"#).spec::<Spec>().unwrap_err();
        assert_eq!(e.field.as_deref(), Some("spec.routes[0]"));
        assert!(e.message.contains("missing field `pathPrefix`"), "{}", e.message);

        #[derive(Debug, Deserialize)]
        struct Required {
            #[allow(dead_code, reason = "read only to check that the document deserializes")]
            port: u16,
        }
        let e = doc(r#"{"kind":"X"}"#).spec::<Required>().unwrap_err();
        assert_eq!(e.field.as_deref(), Some("spec"));
        assert!(e.message.contains("missing field `port`"), "{}", e.message);
    }

    #[test]
    fn plugin_error_builder() {
        let e = PluginError::new("no endpoints").with_document("Service/a").with_field("spec.endpoints");
        assert_eq!(e.document.as_deref(), Some("Service/a"));
        assert_eq!(e.field.as_deref(), Some("spec.endpoints"));
        let w = doc("{}").warning("spec.routes", "shadowed");
        assert_eq!(w.severity, Severity::Warning);
        assert_eq!(w.message, "shadowed (web.yaml#2)");
    }
}
