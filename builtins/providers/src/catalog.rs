//! The model catalog: context window, output limit and price by model-name prefix.
//!
//! The longest matching prefix wins, so `claude-opus-4-6` finds its own entry
//! before `claude-opus-4`. A model the catalog does not know gets 128,000
//! tokens of context and 16,384 of output; `ProviderConfig` can override both.
//! Prices are the providers' published list prices in US dollars per million
//! tokens, for the models whose prices were published when the entry was
//! written; a model without one reports no cost (`ProviderConfig::price` sets
//! it), so a cost budget cannot be checked against it.

/// A model's limits, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLimits {
    /// The context window (input and output together).
    pub context_window: u64,
    /// The most output tokens one reply may have.
    pub max_output_tokens: u32,
}

/// The limits of a model the catalog does not know.
pub const UNKNOWN_MODEL: ModelLimits = ModelLimits {
    context_window: 128_000,
    max_output_tokens: 16_384,
};

/// A model's list price, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Input tokens (not read from or written to the prompt cache).
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Input tokens read from the prompt cache.
    pub cache_read: f64,
    /// Input tokens written to the prompt cache.
    pub cache_write: f64,
}

impl Price {
    /// What `usage` costs, in millionths of a US dollar (a dollar per million tokens is a
    /// micro-dollar per token).
    pub fn cost_micros(&self, usage: &noeta_core::model::Usage) -> u64 {
        let cost = usage.input_tokens as f64 * self.input
            + usage.output_tokens as f64 * self.output
            + usage.cache_read_tokens as f64 * self.cache_read
            + usage.cache_write_tokens as f64 * self.cache_write;
        cost.round() as u64
    }
}

/// What a reply cost, from its usage and the model's price: none without a price, and none
/// for a reply that reported no usage (it is unknown, not free).
pub(crate) fn cost_of(price: Option<Price>, usage: &noeta_core::model::Usage) -> Option<u64> {
    let reported = usage.input_tokens
        + usage.output_tokens
        + usage.cache_read_tokens
        + usage.cache_write_tokens
        > 0;
    price.filter(|_| reported).map(|p| p.cost_micros(usage))
}

/// Anthropic's pricing shape: cache reads at a tenth of input, cache writes at 1.25 times.
const fn anthropic(input: f64, output: f64) -> Option<Price> {
    Some(Price {
        input,
        output,
        cache_read: input / 10.0,
        cache_write: input * 1.25,
    })
}

/// OpenAI's: cached input at the given price, no charge to write the cache.
const fn openai(input: f64, output: f64, cached: f64) -> Option<Price> {
    Some(Price {
        input,
        output,
        cache_read: cached,
        cache_write: 0.0,
    })
}

/// One catalog row.
struct Entry {
    prefix: &'static str,
    context_window: u64,
    max_output_tokens: u32,
    price: Option<Price>,
    /// OpenAI models that refuse function tools on chat completions while reasoning at their
    /// default effort (GPT-5.2 and later): a request with tools asks for `reasoning_effort: none`.
    tools_without_reasoning: bool,
}

const fn row(prefix: &'static str, context_window: u64, max_output_tokens: u32) -> Entry {
    Entry {
        prefix,
        context_window,
        max_output_tokens,
        price: None,
        tools_without_reasoning: false,
    }
}

const fn priced(
    prefix: &'static str,
    context_window: u64,
    max_output_tokens: u32,
    price: Option<Price>,
) -> Entry {
    Entry {
        prefix,
        context_window,
        max_output_tokens,
        price,
        tools_without_reasoning: false,
    }
}

const fn reasoning_row(prefix: &'static str, context_window: u64, max_output_tokens: u32) -> Entry {
    Entry {
        prefix,
        context_window,
        max_output_tokens,
        price: None,
        tools_without_reasoning: true,
    }
}

const CATALOG: &[Entry] = &[
    // Anthropic
    row("claude-fable-5", 1_000_000, 128_000),
    row("claude-opus-5", 1_000_000, 128_000),
    row("claude-sonnet-5", 1_000_000, 128_000),
    // Haiku 5's limits are taken as Haiku 4.5's until they are published.
    row("claude-haiku-5", 200_000, 64_000),
    row("claude-opus-4-8", 1_000_000, 128_000),
    row("claude-opus-4-7", 1_000_000, 128_000),
    row("claude-opus-4-6", 1_000_000, 128_000),
    row("claude-sonnet-4-6", 1_000_000, 128_000),
    priced("claude-opus-4-5", 200_000, 64_000, anthropic(5.0, 25.0)),
    priced("claude-sonnet-4-5", 200_000, 64_000, anthropic(3.0, 15.0)),
    priced("claude-haiku-4-5", 200_000, 64_000, anthropic(1.0, 5.0)),
    priced("claude-opus-4-1", 200_000, 32_000, anthropic(15.0, 75.0)),
    priced("claude-opus-4", 200_000, 32_000, anthropic(15.0, 75.0)),
    priced("claude-sonnet-4", 200_000, 64_000, anthropic(3.0, 15.0)),
    priced("claude-3-7-sonnet", 200_000, 64_000, anthropic(3.0, 15.0)),
    priced("claude-3-5-sonnet", 200_000, 8_192, anthropic(3.0, 15.0)),
    priced("claude-3-5-haiku", 200_000, 8_192, anthropic(0.8, 4.0)),
    priced("claude-3-haiku", 200_000, 4_096, anthropic(0.25, 1.25)),
    // OpenAI
    reasoning_row("gpt-6", 1_050_000, 128_000),
    reasoning_row("gpt-5.6", 1_050_000, 128_000),
    reasoning_row("gpt-5.5", 400_000, 128_000),
    reasoning_row("gpt-5.4", 400_000, 128_000),
    reasoning_row("gpt-5.2", 400_000, 128_000),
    priced("gpt-5", 400_000, 128_000, openai(1.25, 10.0, 0.125)),
    priced("gpt-4.1", 1_047_576, 32_768, openai(2.0, 8.0, 0.5)),
    priced("gpt-4o", 128_000, 16_384, openai(2.5, 10.0, 1.25)),
    priced("o3", 200_000, 100_000, openai(2.0, 8.0, 0.5)),
    priced("o4-mini", 200_000, 100_000, openai(1.1, 4.4, 0.275)),
];

fn entry(model: &str) -> Option<&'static Entry> {
    CATALOG
        .iter()
        .filter(|e| model.starts_with(e.prefix))
        .max_by_key(|e| e.prefix.len())
}

/// Whether provider `provider` (`anthropic`, `openai`) knows `model`: the catalog has a row
/// for it, of that provider's models. An alias (`sonnet`, `opus`) is no model it knows.
pub fn knows_model(provider: &str, model: &str) -> bool {
    let anthropic = model.starts_with("claude-");
    entry(model).is_some()
        && match provider {
            "anthropic" => anthropic,
            "openai" => !anthropic,
            _ => false,
        }
}

/// The limits of `model`, by the longest catalog prefix it starts with.
pub fn model_limits(model: &str) -> ModelLimits {
    entry(model).map_or(UNKNOWN_MODEL, |e| ModelLimits {
        context_window: e.context_window,
        max_output_tokens: e.max_output_tokens,
    })
}

/// The list price of `model`, when the catalog has one for exactly that model: its entry's
/// name, or that name with a date or `-latest` after it. A variant the prefix also matches
/// (`gpt-4o-mini` under `gpt-4o`) costs differently, so it gets no price rather than a wrong one.
pub fn model_price(model: &str) -> Option<Price> {
    let entry = entry(model)?;
    let rest = &model[entry.prefix.len()..];
    let exact = rest.is_empty()
        || rest == "-latest"
        || rest.strip_prefix('-').is_some_and(|date| {
            date.starts_with("20") && date.chars().all(|c| c.is_ascii_digit() || c == '-')
        });
    entry.price.filter(|_| exact)
}

/// Whether `model` refuses function tools on chat completions unless reasoning is off.
pub(crate) fn tools_without_reasoning(model: &str) -> bool {
    entry(model).is_some_and(|e| e.tools_without_reasoning)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_wins() {
        assert_eq!(model_limits("claude-opus-4-6").max_output_tokens, 128_000);
        assert_eq!(
            model_limits("claude-opus-4-1-20250805").max_output_tokens,
            32_000
        );
        assert_eq!(
            model_limits("claude-sonnet-4-20250514").context_window,
            200_000
        );
        assert_eq!(model_limits("claude-sonnet-5-5").context_window, 1_000_000);
        assert_eq!(model_limits("gpt-6.2-sol").context_window, 1_050_000);
        assert_eq!(model_limits("gpt-5-mini").context_window, 400_000);
    }

    #[test]
    fn an_unknown_model_gets_the_reference_defaults() {
        assert_eq!(model_limits("llama3.2:3b"), UNKNOWN_MODEL);
        assert_eq!(UNKNOWN_MODEL.context_window, 128_000);
        assert_eq!(UNKNOWN_MODEL.max_output_tokens, 16_384);
    }

    #[test]
    fn reasoning_flags_follow_the_family() {
        assert!(tools_without_reasoning("gpt-6-sol"));
        assert!(tools_without_reasoning("gpt-5.4-mini"));
        assert!(!tools_without_reasoning("gpt-5"));
        assert!(!tools_without_reasoning("gpt-4o"));
        assert!(!tools_without_reasoning("qwen3"));
    }

    #[test]
    fn prices_hold_for_the_model_and_its_dated_names_only() {
        let usage = noeta_core::model::Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_tokens: 2_000_000,
            cache_write_tokens: 400_000,
            cost_micros: None,
        };
        // 3.00 + 1.50 + 0.60 + 1.50 dollars.
        let sonnet = model_price("claude-sonnet-4-5-20250929").unwrap();
        assert_eq!(sonnet.cost_micros(&usage), 6_600_000);
        assert!(model_price("claude-sonnet-4-5").is_some());
        assert!(model_price("gpt-4o-2024-08-06").is_some());
        assert!(model_price("gpt-4o-latest").is_some());
        assert_eq!(
            model_price("gpt-4o-mini"),
            None,
            "a variant is not priced as its prefix"
        );
        assert_eq!(model_price("o3-pro"), None);
        assert_eq!(
            model_price("gpt-6-sol"),
            None,
            "no published price in the catalog"
        );
        assert_eq!(model_price("llama3"), None);
    }
}
