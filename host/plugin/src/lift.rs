//! A component's `translate` result, copied into the host under the output cap.
//!
//! Lifting a result copies every string and list out of the plugin's memory. Strings may
//! alias: a list of a million resources can name one 60 MB string a million times, so the copy
//! would be far larger than the plugin's memory. Here each string and list is charged against
//! the call's output budget *before* it is copied, and the lift stops with
//! [`OutputCapExceeded`] as soon as the budget is spent.
//!
//! The types mirror the contract's (`proto/wit/.../plugin.wit`) with bounded leaves, and are
//! converted to the generated ones ([`crate::wit`]) once lifted. They use wasmtime's lifting
//! traits, which this pinned wasmtime version makes public for its derive macros.

use std::cell::Cell;

use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext};
use wasmtime::component::{ComponentType, Lift, WasmList};

use crate::wit;

thread_local! {
    /// Bytes the lift on this thread may still copy; `None` outside a bounded lift.
    static BUDGET: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

/// The lift was stopped: the result holds more than `limit_bytes` (at least `bytes`).
#[derive(Debug)]
pub struct OutputCapExceeded {
    pub bytes: usize,
}

impl std::fmt::Display for OutputCapExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the result holds more than {} bytes", self.bytes)
    }
}

impl std::error::Error for OutputCapExceeded {}

/// Runs `f` (a call whose result is lifted into the types here) with `limit` bytes to copy.
pub fn bounded<T>(limit: usize, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            BUDGET.with(|b| b.set(None));
        }
    }
    BUDGET.with(|b| b.set(Some((limit, 0))));
    let _reset = Reset;
    f()
}

/// Charges `bytes` against the budget, before they are copied.
fn charge(bytes: usize) -> wasmtime::Result<()> {
    BUDGET.with(|b| match b.get() {
        None => Ok(()),
        Some((limit, used)) => {
            let used = used.saturating_add(bytes);
            b.set(Some((limit, used)));
            if used > limit { Err(wasmtime::Error::new(OutputCapExceeded { bytes: used })) } else { Ok(()) }
        }
    })
}

/// A string, charged by its length before it is copied.
pub struct BoundedString(pub String);

// SAFETY: the ABI, lowered form and type check are `String`'s own.
unsafe impl ComponentType for BoundedString {
    type Lower = <String as ComponentType>::Lower;
    const ABI: CanonicalAbiInfo = <String as ComponentType>::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <String as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: lifts exactly as `String` does, after reading the length from the pointer pair.
unsafe impl Lift for BoundedString {
    fn linear_lift_from_flat(cx: &mut LiftContext<'_>, ty: InterfaceType, src: &Self::Lower) -> wasmtime::Result<Self> {
        charge(src[1].get_u32() as usize)?;
        String::linear_lift_from_flat(cx, ty, src).map(BoundedString)
    }

    fn linear_lift_from_memory(cx: &mut LiftContext<'_>, ty: InterfaceType, bytes: &[u8]) -> wasmtime::Result<Self> {
        charge(pair_len(bytes))?;
        String::linear_lift_from_memory(cx, ty, bytes).map(BoundedString)
    }
}

/// The length half of a pointer pair in memory.
fn pair_len(bytes: &[u8]) -> usize {
    bytes.get(4..8).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// A list, charged by the host size of its elements before they are copied.
pub struct BoundedList<T>(pub Vec<T>);

// SAFETY: the ABI, lowered form and type check are `Vec<T>`'s own.
unsafe impl<T: ComponentType> ComponentType for BoundedList<T> {
    type Lower = <Vec<T> as ComponentType>::Lower;
    const ABI: CanonicalAbiInfo = <Vec<T> as ComponentType>::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <Vec<T> as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: lifts exactly as `Vec<T>` does, with the charge between the bounds check and the copy.
unsafe impl<T: Lift> Lift for BoundedList<T> {
    fn linear_lift_from_flat(cx: &mut LiftContext<'_>, ty: InterfaceType, src: &Self::Lower) -> wasmtime::Result<Self> {
        let list = WasmList::<T>::linear_lift_from_flat(cx, ty, src)?;
        charge(list.len().saturating_mul(size_of::<T>().max(1)))?;
        T::linear_lift_list_from_memory(cx, &list).map(BoundedList)
    }

    fn linear_lift_from_memory(cx: &mut LiftContext<'_>, ty: InterfaceType, bytes: &[u8]) -> wasmtime::Result<Self> {
        let list = WasmList::<T>::linear_lift_from_memory(cx, ty, bytes)?;
        charge(list.len().saturating_mul(size_of::<T>().max(1)))?;
        T::linear_lift_list_from_memory(cx, &list).map(BoundedList)
    }
}

#[derive(ComponentType, Lift)]
#[component(variant)]
pub enum Body {
    #[component(name = "json")]
    Json(BoundedString),
    #[component(name = "proto")]
    Proto(BoundedList<u8>),
}

#[derive(ComponentType, Lift)]
#[component(record)]
pub struct XdsResource {
    #[component(name = "type-url")]
    type_url: BoundedString,
    name: BoundedString,
    body: Body,
    document: Option<BoundedString>,
}

/// Contract 0.3.0's resource: 0.1.0's and the node groups it is for.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct XdsResource3 {
    #[component(name = "type-url")]
    type_url: BoundedString,
    name: BoundedString,
    body: Body,
    document: Option<BoundedString>,
    #[component(name = "node-groups")]
    node_groups: BoundedList<BoundedString>,
}

#[derive(ComponentType, Lift)]
#[component(record)]
pub struct Diagnostic {
    severity: wit::Severity,
    message: BoundedString,
    document: Option<BoundedString>,
    field: Option<BoundedString>,
}

#[derive(ComponentType, Lift)]
#[component(record)]
pub struct TranslateResponse {
    resources: BoundedList<XdsResource>,
    diagnostics: BoundedList<Diagnostic>,
}

/// Contract 0.2.0's response: 0.1.0's and the statuses.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct TranslateResponse2 {
    resources: BoundedList<XdsResource>,
    diagnostics: BoundedList<Diagnostic>,
    statuses: BoundedList<DocumentStatus>,
}

/// Contract 0.3.0's response: 0.2.0's, its resources naming their node groups.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct TranslateResponse3 {
    resources: BoundedList<XdsResource3>,
    diagnostics: BoundedList<Diagnostic>,
    statuses: BoundedList<DocumentStatus>,
}

#[derive(ComponentType, Lift)]
#[component(record)]
pub struct DocumentStatus {
    document: BoundedString,
    status: BoundedString,
}

#[derive(ComponentType, Lift)]
#[component(record)]
pub struct PluginError {
    message: BoundedString,
    document: Option<BoundedString>,
    field: Option<BoundedString>,
}

fn opt(s: Option<BoundedString>) -> Option<String> {
    s.map(|s| s.0)
}

impl From<TranslateResponse> for wit::TranslateResponse {
    fn from(r: TranslateResponse) -> Self {
        wit::TranslateResponse {
            resources: r
                .resources
                .0
                .into_iter()
                .map(|x| wit::XdsResource {
                    type_url: x.type_url.0,
                    name: x.name.0,
                    body: match x.body {
                        Body::Json(s) => wit::Body::Json(s.0),
                        Body::Proto(b) => wit::Body::Proto(b.0),
                    },
                    document: opt(x.document),
                })
                .collect(),
            diagnostics: r
                .diagnostics
                .0
                .into_iter()
                .map(|d| wit::Diagnostic {
                    severity: d.severity,
                    message: d.message.0,
                    document: opt(d.document),
                    field: opt(d.field),
                })
                .collect(),
        }
    }
}

impl From<TranslateResponse> for crate::Translated {
    fn from(r: TranslateResponse) -> Self {
        crate::Translated::of(r.into())
    }
}

fn statuses(s: BoundedList<DocumentStatus>) -> Vec<crate::DocumentStatus> {
    s.0.into_iter().map(|s| crate::DocumentStatus { document: s.document.0, status: s.status.0 }).collect()
}

impl From<TranslateResponse2> for crate::Translated {
    fn from(r: TranslateResponse2) -> Self {
        let response = TranslateResponse { resources: r.resources, diagnostics: r.diagnostics }.into();
        crate::Translated { response, statuses: statuses(r.statuses), node_groups: Vec::new(), removed: Vec::new() }
    }
}

impl From<TranslateResponse3> for crate::Translated {
    fn from(r: TranslateResponse3) -> Self {
        let mut node_groups = Vec::with_capacity(r.resources.0.len());
        let mut resources = Vec::with_capacity(r.resources.0.len());
        for x in r.resources.0 {
            node_groups.push(x.node_groups.0.into_iter().map(|g| g.0).collect::<Vec<String>>());
            resources.push(XdsResource { type_url: x.type_url, name: x.name, body: x.body, document: x.document });
        }
        if node_groups.iter().all(Vec::is_empty) {
            node_groups.clear();
        }
        let response = TranslateResponse { resources: BoundedList(resources), diagnostics: r.diagnostics }.into();
        crate::Translated { response, statuses: statuses(r.statuses), node_groups, removed: Vec::new() }
    }
}

/// Contract 0.4.0's resource key.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct ResourceKey {
    #[component(name = "type-url")]
    type_url: BoundedString,
    name: BoundedString,
}

/// Contract 0.4.0's response: 0.3.0's, and the resources a changes call removed.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct TranslateResponse4 {
    resources: BoundedList<XdsResource3>,
    diagnostics: BoundedList<Diagnostic>,
    statuses: BoundedList<DocumentStatus>,
    removed: BoundedList<ResourceKey>,
}

impl From<TranslateResponse4> for crate::Translated {
    fn from(r: TranslateResponse4) -> Self {
        let removed = r.removed.0.into_iter().map(|k| (k.type_url.0, k.name.0)).collect();
        let three = TranslateResponse3 { resources: r.resources, diagnostics: r.diagnostics, statuses: r.statuses };
        crate::Translated { removed, ..three.into() }
    }
}

/// A request in contract 0.4.0's types: 0.3.0's, a full call (`removed` none) or a changes call
/// with the ids removed.
pub fn request_v4(
    r: &wit::TranslateRequest,
    removed: Option<Vec<String>>,
) -> crate::wit4::xdst::plugin::types::TranslateRequest {
    use crate::wit4::xdst::plugin::types as t4;
    let three = request_v3(r);
    t4::TranslateRequest {
        node_group: three.node_group,
        documents: three
            .documents
            .into_iter()
            .map(|d| t4::IntentDocument { kind: d.kind, name: d.name, origin: d.origin, json: d.json })
            .collect(),
        resources: three
            .resources
            .into_iter()
            .map(|x| t4::XdsResource {
                type_url: x.type_url,
                name: x.name,
                body: match x.body {
                    crate::wit3::xdst::plugin::types::Body::Json(s) => t4::Body::Json(s),
                    crate::wit3::xdst::plugin::types::Body::Proto(b) => t4::Body::Proto(b),
                },
                document: x.document,
                node_groups: x.node_groups,
            })
            .collect(),
        config: three.config,
        changes: removed.map(|removed| t4::Changes { removed }),
    }
}

/// A request in contract 0.3.0's types: the resources given to a `patch` plugin name no node
/// groups (it runs for one group).
pub fn request_v3(r: &wit::TranslateRequest) -> crate::wit3::xdst::plugin::types::TranslateRequest {
    use crate::wit3::xdst::plugin::types as t3;
    t3::TranslateRequest {
        node_group: r.node_group.clone(),
        documents: r
            .documents
            .iter()
            .map(|d| t3::IntentDocument {
                kind: d.kind.clone(),
                name: d.name.clone(),
                origin: d.origin.clone(),
                json: d.json.clone(),
            })
            .collect(),
        resources: r
            .resources
            .iter()
            .map(|x| t3::XdsResource {
                type_url: x.type_url.clone(),
                name: x.name.clone(),
                body: match &x.body {
                    wit::Body::Json(s) => t3::Body::Json(s.clone()),
                    wit::Body::Proto(b) => t3::Body::Proto(b.clone()),
                },
                document: x.document.clone(),
                node_groups: Vec::new(),
            })
            .collect(),
        config: r.config.clone(),
    }
}

impl From<PluginError> for wit::PluginError {
    fn from(e: PluginError) -> Self {
        wit::PluginError { message: e.message.0, document: opt(e.document), field: opt(e.field) }
    }
}
