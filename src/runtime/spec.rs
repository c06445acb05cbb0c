//! A tool's declaration: what every face (MCP, CLI, daemon) reads about a capability.

use serde_json::{json, Value};

/// What running a tool does to the world. Faces map it to MCP hints the same way everywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Computes only.
    None,
    /// Reads state, changes nothing.
    Read,
    /// Adds to local state without destroying anything (an additive write).
    Write,
    /// Changes or removes existing state.
    Destructive,
    /// Writes somewhere outside CAR (a remote service, the network).
    ExternalWrite,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::None => "none",
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::Destructive => "destructive",
            Effect::ExternalWrite => "external_write",
        }
    }

    pub fn read_only(self) -> bool {
        match self {
            Effect::None | Effect::Read => true,
            Effect::Write | Effect::Destructive | Effect::ExternalWrite => false,
        }
    }
}

/// Whether a call must be confirmed by the host (`confirm:<tool>` in the connection's context).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    NotRequired,
    Required,
}

/// Whether the policy gate judges a tool's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gating {
    /// Every call passes the gate (the default).
    Gated,
    /// The gate never blocks it: a tool that only reads the rules and changes nothing, and must
    /// stay able to explain a denial (`policy_check`). Declared on the spec, honoured by the
    /// dispatcher, so no gate needs to know tools by name.
    Exempt,
}

/// Whether calls of a tool may run beside each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallelism {
    Safe,
    Exclusive,
}

/// Whether calling a tool twice with the same arguments has the effect of calling it once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idempotence {
    Idempotent,
    NotIdempotent,
}

/// How a result is written where a face shows it as text (the MCP `content` text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResultText {
    /// Its JSON.
    #[default]
    Json,
    /// Its JSON and a newline, exactly as `car --json` prints it: the project tools, whose text
    /// is the CLI's envelope byte for byte (the seed's contract).
    JsonLine,
}

/// The declaration of one tool.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub title: String,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub effect: Effect,
    pub idempotence: Idempotence,
    pub confirmation: Confirmation,
    pub parallelism: Parallelism,
    /// How long one call may run before it is stopped with status `timeout`.
    pub timeout: std::time::Duration,
    /// The handler returns an MCP `CallToolResult` (a connector's tool): the MCP face serves its
    /// content as is instead of wrapping the value.
    pub passthrough: bool,
    /// How a face that shows a result as text writes it.
    pub text: ResultText,
    pub gating: Gating,
    /// For a tool of several actions (`{action, …}`): the actions that only read. A call of
    /// one of them has effect `read` whatever [`ToolSpec::effect`] says (see
    /// [`ToolSpec::effect_of`]).
    pub read_actions: &'static [&'static str],
    /// Listed in `tools/list` and `car tools list`. An unlisted tool is an operation a face
    /// serves another way (the MCP prompt, the resources): it still passes the dispatcher —
    /// schema, policy gate, time bound, execution log — but is not callable as a tool.
    pub listed: bool,
}

impl ToolSpec {
    /// A spec with an object input schema, effect `read`, idempotent, parallel-safe,
    /// no confirmation and a 300 s time bound; adjust with the builder methods.
    pub fn new(name: &str, description: &str, input_schema: Value) -> ToolSpec {
        ToolSpec {
            name: name.to_string(),
            title: name.to_string(),
            description: description.to_string(),
            input_schema,
            output_schema: None,
            effect: Effect::Read,
            idempotence: Idempotence::Idempotent,
            confirmation: Confirmation::NotRequired,
            parallelism: Parallelism::Safe,
            timeout: std::time::Duration::from_secs(300),
            passthrough: false,
            text: ResultText::Json,
            gating: Gating::Gated,
            read_actions: &[],
            listed: true,
        }
    }

    /// The actions of a tool of several that only read (see [`ToolSpec::read_actions`]).
    pub fn read_actions(mut self, actions: &'static [&'static str]) -> Self {
        self.read_actions = actions;
        self
    }

    /// What one call with `args` does: [`Effect::Read`] for a read action, else the tool's
    /// effect.
    pub fn effect_of(&self, args: &Value) -> Effect {
        match args.get("action").and_then(Value::as_str) {
            Some(action) if self.read_actions.contains(&action) => Effect::Read,
            _ => self.effect,
        }
    }

    pub fn title(mut self, title: &str) -> Self {
        self.title = title.to_string();
        self
    }

    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    pub fn effect(mut self, effect: Effect) -> Self {
        self.effect = effect;
        self
    }

    pub fn idempotence(mut self, idempotence: Idempotence) -> Self {
        self.idempotence = idempotence;
        self
    }

    pub fn confirmation(mut self, confirmation: Confirmation) -> Self {
        self.confirmation = confirmation;
        self
    }

    pub fn parallelism(mut self, parallelism: Parallelism) -> Self {
        self.parallelism = parallelism;
        self
    }

    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Marks the result as an MCP `CallToolResult` to pass through (see [`ToolSpec::passthrough`]).
    pub fn passthrough(mut self) -> Self {
        self.passthrough = true;
        self
    }

    /// A spec whose schemas are generated from the argument and result types.
    pub fn typed<A: schemars::JsonSchema, R: schemars::JsonSchema>(mut self) -> Self {
        self.input_schema = super::schema::input_of::<A>();
        self.output_schema = Some(super::schema::output_of::<R>());
        self
    }

    /// Writes the result's text as a JSON line (see [`ResultText::JsonLine`]).
    pub fn text(mut self, text: ResultText) -> Self {
        self.text = text;
        self
    }

    /// Keeps the operation out of the tool lists (see [`ToolSpec::listed`]).
    pub fn unlisted(mut self) -> Self {
        self.listed = false;
        self
    }

    /// Exempts the tool from the policy gate (see [`Gating::Exempt`]).
    pub fn exempt_from_gate(mut self) -> Self {
        self.gating = Gating::Exempt;
        self
    }

    /// The four MCP annotation hints, always all present.
    pub fn annotations(&self) -> Value {
        json!({
            "title": self.title,
            "readOnlyHint": self.effect.read_only(),
            "destructiveHint": self.effect == Effect::Destructive,
            "idempotentHint": self.idempotence == Idempotence::Idempotent,
            "openWorldHint": self.effect == Effect::ExternalWrite,
        })
    }

    /// CAR's own metadata: effect, confirmation and parallel safety.
    pub fn meta(&self) -> Value {
        json!({
            "car/effect": self.effect.as_str(),
            "car/confirmation": match self.confirmation {
                Confirmation::Required => "required",
                Confirmation::NotRequired => "none",
            },
            "car/parallel_safe": self.parallelism == Parallelism::Safe,
        })
    }

    /// The declaration as one JSON document (`car tools list --json`, MCP `tools/list`).
    pub fn to_json(&self) -> Value {
        let mut tool = json!({
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": self.annotations(),
            "_meta": self.meta(),
        });
        if let Some(schema) = &self.output_schema {
            tool["outputSchema"] = schema.clone();
        }
        tool
    }
}
