//! Generated bridge cases for memory recall: each case is a bridge fact (the thing the question
//! names ↔ a named thing) and an answer fact (that named thing ↔ the answer), the answer
//! sharing no content word with the question; plus distractors that share common words and
//! some of the cases' entity names, and labelled reminder requests. Deterministic per seed.

/// One generated case.
pub struct Case {
    pub shape: &'static str,
    /// Asked to find `answer` through `bridge`.
    pub multi_hop: String,
    /// Asked to find `bridge` directly.
    pub single_hop: String,
    pub bridge: (String, String),
    pub answer: (String, String),
    /// An older answer with the answer's subject, written first and replaced by it.
    pub stale: Option<(String, String)>,
}

/// The benches' generator (benches/common/rng.rs).
pub use crate::paraphrase::Rng;

const DOMAINS: &[&str] = &[
    "invoice",
    "payout",
    "thumbnail",
    "ledger",
    "webhook",
    "coupon",
    "avatar",
    "receipt",
    "refund",
    "shipment",
    "catalog",
    "loyalty",
    "tax",
    "subscription",
    "onboarding",
    "inventory",
    "quote",
    "warranty",
    "voucher",
    "payroll",
    "chargeback",
    "itinerary",
    "prescription",
    "mortgage",
    "timesheet",
    "manifest",
    "playlist",
    "transcript",
    "telemetry",
    "badge",
];
const ACTIONS: &[&str] = &[
    "rendering",
    "scheduling",
    "resizing",
    "indexing",
    "scoring",
    "parsing",
    "reconciliation",
    "delivery",
    "cleanup",
    "export",
    "sync",
    "import",
    "validation",
    "batching",
    "archiving",
    "enrichment",
    "dedup",
    "translation",
];
const SYSTEMS: &[&str] = &[
    "worker", "job", "service", "pipeline", "daemon", "cron", "queue", "api",
];

const CODENAMES: &[&str] = &[
    "Falcon", "Heron", "Osprey", "Kestrel", "Plover", "Puffin", "Merlin", "Condor", "Ibis",
    "Egret", "Petrel", "Shrike", "Avocet", "Curlew",
];
const TECH: &[&str] = &[
    "headless Chromium",
    "ffmpeg",
    "libvips",
    "a GPU node",
    "Redis streams",
    "Tesseract OCR",
    "wkhtmltopdf",
    "ImageMagick",
    "DuckDB",
    "a JVM sidecar",
];
const NEEDS: &[&str] = &[
    "assets/fonts embedded",
    "16 GB of RAM",
    "the eu-west bucket",
    "a warm disk cache",
    "the libssl 3 runtime image",
    "outbound port 8443",
    "a mounted secrets volume",
    "the glibc base image",
];
const SQUADS: &[&str] = &[
    "Tangerine",
    "Bluebird",
    "Quartz",
    "Juniper",
    "Marigold",
    "Obsidian",
    "Saffron",
    "Cobalt",
    "Lichen",
    "Basalt",
    "Wisteria",
    "Nimbus",
];
const CHANNELS: &[&str] = &[
    "#ask-core",
    "#help-data",
    "#infra-desk",
    "#pay-devs",
    "#growth-eng",
];
const DAYS: &[&str] = &["Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays"];
const VENDORS: &[&str] = &[
    "Postmark",
    "Mailgun",
    "Twilio",
    "Vonage",
    "Sendbird",
    "Pusher",
    "Courier",
    "Knock",
    "Plivo",
    "Mailjet",
    "Bandwidth",
    "Telnyx",
];
const REPOS: &[&str] = &[
    "atlas", "borealis", "cinder", "dynamo", "ember", "fjord", "granite", "helix", "indigo",
    "jetty", "kelp", "lumen",
];
const TOOLS: &[&str] = &[
    "Bazel",
    "Earthly",
    "Buildkite",
    "ArgoCD",
    "Spinnaker",
    "goreleaser",
];
const ROTATIONS: &[&str] = &[
    "Nightjar",
    "Owlwatch",
    "Lantern",
    "Moonshift",
    "Sentinel",
    "Beacon",
    "Vigil",
    "Starling",
    "Nocturne",
    "Halyard",
    "Watchtower",
    "Lodestar",
];
const PEOPLE: &[&str] = &[
    "Priya", "Mateo", "Aiko", "Olu", "Freya", "Tomasz", "Leila", "Jonas", "Chen", "Amara",
];

/// Common engineering words the distractors are made of (they share them with the questions).
const COMMON: &[&str] = &[
    "service",
    "worker",
    "job",
    "pipeline",
    "team",
    "squad",
    "rotation",
    "repository",
    "code",
    "depends",
    "runtime",
    "production",
    "change",
    "night",
    "notifications",
    "office",
    "hours",
    "week",
    "backup",
    "requests",
    "second",
    "minute",
    "owned",
    "pages",
    "alerts",
    "deploys",
    "builds",
    "reviews",
    "latency",
    "retries",
    "timeout",
    "config",
    "schema",
    "migration",
    "dashboard",
    "metrics",
    "logs",
    "cache",
    "database",
    "queue",
    "api",
    "errors",
    "release",
    "staging",
    "tests",
    "flaky",
    "budget",
    "quota",
    "region",
    "cluster",
    "node",
    "memory",
    "disk",
    "cpu",
    "network",
    "secrets",
    "tokens",
    "users",
    "customers",
    "orders",
    "emails",
    "reach",
    "woken",
    "breaks",
    "ask",
    "changing",
    "lives",
    "holds",
    "sent",
    "receives",
];

fn desc(rng: &mut Rng, used: &mut std::collections::HashSet<String>) -> String {
    loop {
        let d = format!(
            "{} {} {}",
            rng.pick(DOMAINS),
            rng.pick(ACTIONS),
            rng.pick(SYSTEMS)
        );
        if used.insert(d.clone()) {
            return d;
        }
    }
}

/// `n` cases spread over the five shapes, every entity name used once per shape.
pub fn cases(seed: u64, n: usize) -> Vec<Case> {
    let mut rng = Rng::new(seed);
    let mut used = std::collections::HashSet::new();
    let mut out = Vec::new();
    for i in 0..n {
        let d = desc(&mut rng, &mut used);
        let k = i / 5;
        let case = match i % 5 {
            0 => {
                let c = CODENAMES[k % CODENAMES.len()];
                let (tech, need) = (rng.pick(TECH), rng.pick(NEEDS));
                Case {
                    shape: "codename",
                    multi_hop: format!("what does the {d} depend on at runtime?"),
                    single_hop: format!("what is the codename of the {d}?"),
                    bridge: (
                        format!("{d} codename"),
                        format!("{c} is the codename of the {d}."),
                    ),
                    answer: (
                        format!("{c} stack"),
                        format!("{c} runs {tech} and needs {need}."),
                    ),
                    stale: Some((
                        format!("{c} stack"),
                        format!("{c} ran on a plain VM with no extras."),
                    )),
                }
            }
            1 => {
                let s = SQUADS[k % SQUADS.len()];
                let (chan, day) = (rng.pick(CHANNELS), rng.pick(DAYS));
                Case {
                    shape: "owner team",
                    multi_hop: format!("who should I ask about changing the {d}?"),
                    single_hop: format!("which squad owns the {d}?"),
                    bridge: (
                        format!("{d} owner"),
                        format!("The {d} is owned by the {s} squad."),
                    ),
                    answer: (
                        format!("{s} contact"),
                        format!("{s} hold open sessions on {day} in {chan}."),
                    ),
                    stale: None,
                }
            }
            2 => {
                let v = VENDORS[k % VENDORS.len()];
                let rate = 5 + rng.below(95);
                Case {
                    shape: "vendor",
                    multi_hop: format!("how many {d} notifications can go out each minute?"),
                    single_hop: format!("which provider sends the {d} notifications?"),
                    bridge: (
                        format!("{d} provider"),
                        format!("{d} notifications are sent through {v}."),
                    ),
                    answer: (
                        format!("{v} limits"),
                        format!("{v} throttles at {rate} calls per key; bursts get HTTP 429."),
                    ),
                    stale: None,
                }
            }
            3 => {
                let r = REPOS[k % REPOS.len()];
                let tool = rng.pick(TOOLS);
                Case {
                    shape: "repository",
                    multi_hop: format!("how does a change to the {d} reach production?"),
                    single_hop: format!("which repository holds the {d} code?"),
                    bridge: (
                        format!("{d} repository"),
                        format!("The {d} code lives in the {r} repository."),
                    ),
                    answer: (
                        format!("{r} shipping"),
                        format!("{r} ships with {tool} from the main branch after approval."),
                    ),
                    stale: Some((
                        format!("{r} shipping"),
                        format!("{r} was copied to hosts by hand over scp."),
                    )),
                }
            }
            _ => {
                let rot = ROTATIONS[k % ROTATIONS.len()];
                let (a, b) = (rng.pick(PEOPLE), rng.pick(PEOPLE));
                Case {
                    shape: "on-call rotation",
                    multi_hop: format!("who gets woken up when the {d} breaks at night?"),
                    single_hop: format!("which rotation receives pages for the {d}?"),
                    bridge: (
                        format!("{d} paging"),
                        format!("Pages for the {d} go to the {rot} rotation."),
                    ),
                    answer: (
                        format!("{rot} staffing"),
                        format!("{rot} is staffed by {a}, with {b} as fallback."),
                    ),
                    stale: None,
                }
            }
        };
        out.push(case);
    }
    out
}

/// Distractors: sentences of common words and the cases' domain words in other combinations,
/// one in fifty naming an entity of the cases in an unrelated context.
pub fn distractors(seed: u64, n: usize) -> Vec<(String, String)> {
    let mut rng = Rng::new(seed ^ 0x5eed);
    let entities: Vec<&str> = [CODENAMES, SQUADS, VENDORS, REPOS, ROTATIONS].concat();
    (0..n)
        .map(|i| {
            let topic = format!(
                "{} {} {}",
                rng.pick(DOMAINS),
                rng.pick(ACTIONS),
                rng.pick(SYSTEMS)
            );
            let words: Vec<&str> = (0..6 + rng.below(6)).map(|_| rng.pick(COMMON)).collect();
            let mut body = format!("The {topic} {} {} {}", words[0], words[1], words[2]);
            body.push_str(&format!(" and the {} {} {}.", words[3], words[4], words[5]));
            if words.len() > 6 {
                body.push_str(&format!(" Note: {}.", words[6..].join(" ")));
            }
            if i % 50 == 0 {
                body.push_str(&format!(
                    " The {} meeting room is booked then.",
                    rng.pick(&entities)
                ));
            }
            (format!("{topic} note {i}"), body)
        })
        .collect()
}

/// Labelled reminder requests: `(request, index of the case whose bridge fact answers it)`,
/// `None` when no stored entry concerns it. Every request comes with a trigger set.
pub fn reminder_requests(cases: &[Case], seed: u64) -> Vec<(String, Option<usize>)> {
    let mut rng = Rng::new(seed ^ 0xfeed);
    let mut out: Vec<(String, Option<usize>)> = cases
        .iter()
        .enumerate()
        .map(|(i, case)| {
            let text = match rng.below(3) {
                0 => case.single_hop.clone(),
                1 => format!(
                    "about to edit the {} config",
                    case.bridge.0.rsplit_once(' ').map_or("", |p| p.0)
                ),
                _ => format!(
                    "the {} keeps failing after my change",
                    case.bridge.0.rsplit_once(' ').map_or("", |p| p.0)
                ),
            };
            (text, Some(i))
        })
        .collect();
    const UNRELATED: &[&str] = &[
        "write a haiku about autumn",
        "rename tmp to buffer in this function",
        "explain what a monad is",
        "format this json file",
        "convert the table to markdown",
        "add a docstring to parse_args",
        "what is the capital of Portugal",
        "sort these names alphabetically",
        "fix the typo in the readme heading",
        "make the button blue",
        "summarize this paragraph in one line",
        "translate hello world into french",
        "generate a random password example",
        "draw an ascii cat",
        "compute 17 times 23",
        "rename the variable x to count",
        "split this long line in two",
        "why is the sky blue",
        "list five prime numbers",
        "indent this yaml block",
        "turn the loop into an iterator chain",
        "add type hints to the helper",
        "write a limerick about coffee",
        "reverse a string in python",
    ];
    for text in UNRELATED {
        out.push((text.to_string(), None));
    }
    out
}
