//! What a Kubernetes API server keeps of a status: the `status` schema of each Gateway API
//! kind, read from the upstream CustomResourceDefinitions (`../shared/gateway-api-crds`, the
//! experimental channel at the conformance suite's commit), and a check of a status against it
//! that reports what the API server would prune (a field the schema does not name) and what
//! it would refuse (a missing required field, a wrong type, a value outside its enum, pattern,
//! length, count or format, two list entries with one key).
//!
//! Not checked: the CEL rules (`x-kubernetes-validations`); [`Schemas::cel_rules`] counts
//! those a status passed by, so a report can say how many went unchecked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::Value;

/// Where the CRDs are: `$XDST_GATEWAY_API_CRDS`, else `../shared/gateway-api-crds` beside the
/// repository; `None` when neither is there (a test then says it skipped, and why).
pub fn crds_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("XDST_GATEWAY_API_CRDS").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let root = crate::repo_root();
    let dir = root.parent().unwrap_or(&root).join("shared/gateway-api-crds");
    dir.is_dir().then_some(dir)
}

/// An error naming what is wrong with `doc`'s status (an object as `GET /intent/...` serves
/// it), checked against its kind's schema when the CRDs are here ([`crds_dir`]). Without them
/// it passes, after one line saying the check was skipped: the caller's other checks still run.
pub fn ensure_kept(doc: &Value) -> anyhow::Result<()> {
    static SCHEMAS: std::sync::OnceLock<Option<Schemas>> = std::sync::OnceLock::new();
    let schemas = SCHEMAS.get_or_init(|| match crds_dir() {
        Some(dir) => Some(Schemas::load(&dir).expect("the Gateway API CRDs read")),
        None => {
            eprintln!("status schema checks skipped: no Gateway API CRDs (../shared/gateway-api-crds)");
            None
        }
    });
    let Some(schemas) = schemas else { return Ok(()) };
    let problems = schemas.document_problems(doc);
    anyhow::ensure!(
        problems.is_empty(),
        "{}/{}'s status is not one an API server keeps: {}\n{}",
        doc["kind"].as_str().unwrap_or_default(),
        doc["metadata"]["name"].as_str().unwrap_or_default(),
        problems.join("; "),
        doc["status"]
    );
    Ok(())
}

/// Each kind's `status` schema (storage version), by `group/Kind`.
pub struct Schemas {
    by_kind: BTreeMap<String, Value>,
    cel: std::sync::atomic::AtomicUsize,
}

impl Schemas {
    /// Reads every `*.yaml` CRD in `dir`.
    pub fn load(dir: &Path) -> anyhow::Result<Schemas> {
        let mut by_kind = BTreeMap::new();
        for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path)?;
            let crd: Value = serde_yaml_ng::from_str(&text).with_context(|| format!("{}", path.display()))?;
            let group = crd["spec"]["group"].as_str().context("spec.group")?;
            let kind = crd["spec"]["names"]["kind"].as_str().context("spec.names.kind")?;
            let versions = crd["spec"]["versions"].as_array().context("spec.versions")?;
            let storage = versions.iter().find(|v| v["storage"] == true).context("no storage version")?;
            // A kind without a status in its schema keeps none: `Value::Null` says so.
            let status = storage["schema"]["openAPIV3Schema"]["properties"]["status"].clone();
            by_kind.insert(format!("{group}/{kind}"), status);
        }
        anyhow::ensure!(!by_kind.is_empty(), "no CRDs in {}", dir.display());
        Ok(Schemas { by_kind, cel: 0.into() })
    }

    /// The kinds (`group/Kind`) there is a schema for.
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.by_kind.keys().map(String::as_str)
    }

    /// How many CEL rules the statuses checked so far passed by unchecked.
    pub fn cel_rules(&self) -> usize {
        self.cel.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What is wrong with `status` as the status of a `claim` (`group/Kind`) object: each
    /// problem with its path (`status.parents[0].conditions[1].lastTransitionTime: required`).
    /// A kind with no schema here is an error too: xdst writes no status for what it does not
    /// know the schema of.
    pub fn problems(&self, claim: &str, status: &Value) -> Vec<String> {
        let Some(schema) = self.by_kind.get(claim) else {
            return vec![format!("status: {claim} has no CRD here, so no status of its own")];
        };
        if schema.is_null() {
            return vec![format!("status: {claim}'s schema has no status")];
        }
        let mut out = Vec::new();
        self.check(schema, status, "status", &mut out);
        out
    }

    /// What is wrong with the status of `doc`, an object as `GET /intent/...` serves it
    /// (`apiVersion`, `kind`, `status`): none when it has no status, as a kind with no place
    /// for one must.
    pub fn document_problems(&self, doc: &Value) -> Vec<String> {
        let group = doc["apiVersion"].as_str().and_then(|v| v.rsplit_once('/')).map_or("core", |(g, _)| g);
        let claim = format!("{group}/{}", doc["kind"].as_str().unwrap_or_default());
        match doc.get("status") {
            None | Some(Value::Null) => Vec::new(),
            Some(status) => self.problems(&claim, status),
        }
    }

    fn check(&self, schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
        if let Some(rules) = schema.get("x-kubernetes-validations").and_then(Value::as_array) {
            self.cel.fetch_add(rules.len(), std::sync::atomic::Ordering::Relaxed);
        }
        if let Some(ty) = schema.get("type").and_then(Value::as_str) {
            let fits = match ty {
                "object" => value.is_object(),
                "array" => value.is_array(),
                "string" => value.is_string(),
                "integer" => value.is_i64() || value.is_u64(),
                "number" => value.is_number(),
                "boolean" => value.is_boolean(),
                _ => true,
            };
            if !fits {
                out.push(format!("{path}: must be of type {ty}, is {value}"));
                return;
            }
        }
        if let Some(options) = schema.get("enum").and_then(Value::as_array)
            && !options.contains(value)
        {
            out.push(format!("{path}: {value} is not one of {}", Value::Array(options.clone())));
        }
        for (key, of) in [("oneOf", 1usize), ("anyOf", 0)] {
            if let Some(options) = schema.get(key).and_then(Value::as_array) {
                let fitting = options.iter().filter(|o| self.fits(o, value)).count();
                if (of == 1 && fitting != 1) || fitting == 0 {
                    out.push(format!("{path}: {value} fits {fitting} of the {key} choices"));
                }
            }
        }
        if let Some(not) = schema.get("not")
            && self.fits(not, value)
        {
            out.push(format!("{path}: {value} is what the schema excludes"));
        }
        match value {
            Value::Object(fields) => self.object(schema, fields, path, out),
            Value::Array(items) => self.array(schema, items, path, out),
            Value::String(s) => string(schema, s, path, out),
            Value::Number(n) => {
                let n = n.as_f64().unwrap_or(f64::NAN);
                if schema.get("minimum").and_then(Value::as_f64).is_some_and(|m| n < m) {
                    out.push(format!("{path}: {n} is below the minimum {}", schema["minimum"]));
                }
                if schema.get("maximum").and_then(Value::as_f64).is_some_and(|m| n > m) {
                    out.push(format!("{path}: {n} is above the maximum {}", schema["maximum"]));
                }
                if schema.get("format").and_then(Value::as_str) == Some("int32") && i32::try_from(n as i64).is_err() {
                    out.push(format!("{path}: {n} is not an int32"));
                }
            }
            _ => {}
        }
    }

    /// Whether `value` passes `schema` (for `oneOf`, `anyOf` and `not`).
    fn fits(&self, schema: &Value, value: &Value) -> bool {
        let mut out = Vec::new();
        // A choice's own properties are a constraint, not the object's whole field list.
        let mut open = schema.clone();
        if let Some(o) = open.as_object_mut() {
            o.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
        }
        self.check(&open, value, "", &mut out);
        out.is_empty()
    }

    fn object(&self, schema: &Value, fields: &serde_json::Map<String, Value>, path: &str, out: &mut Vec<String>) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        let open = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !fields.contains_key(name) {
                out.push(format!("{path}.{name}: required"));
            }
        }
        for (name, v) in fields {
            let at = format!("{path}.{name}");
            match (properties.and_then(|p| p.get(name)), additional) {
                (Some(s), _) => self.check(s, v, &at, out),
                (None, Some(s)) if s.is_object() => self.check(s, v, &at, out),
                (None, Some(Value::Bool(true))) => {}
                (None, _) if open => {}
                // What the API server prunes: the user never sees it.
                (None, _) => out.push(format!("{at}: not in the schema (the API server drops it)")),
            }
        }
    }

    fn array(&self, schema: &Value, items: &[Value], path: &str, out: &mut Vec<String>) {
        if schema.get("maxItems").and_then(Value::as_u64).is_some_and(|m| items.len() as u64 > m) {
            out.push(format!("{path}: {} items, at most {} kept", items.len(), schema["maxItems"]));
        }
        if schema.get("minItems").and_then(Value::as_u64).is_some_and(|m| (items.len() as u64) < m) {
            out.push(format!("{path}: {} items, at least {} required", items.len(), schema["minItems"]));
        }
        if let Some(item) = schema.get("items") {
            for (i, v) in items.iter().enumerate() {
                self.check(item, v, &format!("{path}[{i}]"), out);
            }
        }
        // A list of type map: one entry per key.
        let keys: Vec<&str> = schema
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") && !keys.is_empty() {
            let mut seen = std::collections::BTreeSet::new();
            for v in items {
                let key: Vec<String> = keys.iter().map(|k| v.get(*k).map_or("-".into(), Value::to_string)).collect();
                if !seen.insert(key.clone()) {
                    out.push(format!("{path}: two entries with {} {}", keys.join(", "), key.join(", ")));
                }
            }
        }
    }
}

fn string(schema: &Value, s: &str, path: &str, out: &mut Vec<String>) {
    let chars = s.chars().count() as u64;
    if schema.get("maxLength").and_then(Value::as_u64).is_some_and(|m| chars > m) {
        out.push(format!("{path}: {chars} characters, at most {}", schema["maxLength"]));
    }
    if schema.get("minLength").and_then(Value::as_u64).is_some_and(|m| chars < m) {
        out.push(format!("{path}: {chars} characters, at least {}", schema["minLength"]));
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
        match regex::Regex::new(p) {
            Ok(re) if !re.is_match(s) => out.push(format!("{path}: {s:?} does not match {p}")),
            Ok(_) => {}
            Err(e) => out.push(format!("{path}: the schema's pattern {p} does not compile here: {e}")),
        }
    }
    let fits = match schema.get("format").and_then(Value::as_str) {
        Some("date-time") => is_date_time(s),
        Some("ipv4") => s.parse::<std::net::Ipv4Addr>().is_ok(),
        Some("ipv6") => s.parse::<std::net::Ipv6Addr>().is_ok(),
        _ => true,
    };
    if !fits {
        out.push(format!("{path}: {s:?} is not a {}", schema["format"]));
    }
}

/// RFC 3339, as the API server's `date-time` format takes it (`2026-12-07T10:00:00Z`,
/// `...00.5+01:00`).
fn is_date_time(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let head = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && matches!(b[10], b'T' | b't')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !head {
        return false;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    matches!(rest, "Z" | "z")
        || (rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && rest.as_bytes()[3] == b':'
            && rest[1..3].bytes().chain(rest[4..].bytes()).all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::is_date_time;

    #[test]
    fn date_times_are_rfc_3339() {
        assert!(is_date_time("2026-12-07T10:00:00Z"));
        assert!(is_date_time("2026-12-07T10:00:00.25+01:00"));
        assert!(!is_date_time("2026-12-07 10:00:00Z"));
        assert!(!is_date_time("2026-12-07T10:00:00"));
    }
}
