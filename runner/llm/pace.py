"""A pace and a budget ledger shared by every trial of a sweep, in Redis: every LLM request asks first.

What a model's ``rateLimit`` says the provider account allows (requests and tokens per minute, requests in
flight) is held in Redis, shared by every process that reaches the same store: the workers of one ``mcpfleet run``
(its own private redis-server), every trial pod of a cluster (the chart's ``pace.storeUrl``). A limit is keyed by
the provider account and model (apiBase, the key's reference, the LiteLLM model string), not by run: two sweeps on
one key share its limit.

Each request, before it is sent, reserves in one atomic Lua script: a place in the request window, its tokens
(prompt plus the request's output-token ceiling) in the token window, a slot in flight, and its cost (those tokens
priced) against every budget that covers it. After the reply, a second script settles: the provider's reported
tokens and their cost replace the reservation. A request that would take a budget past ``usd`` is never sent
(``BudgetExhausted``): no spend the provider bills exceeds a budget as long as replies stay within their
reservation (the prompt is counted with a margin, the output at its ceiling).

A 429 that still arrives (another client on the same key) halves the shared pace and pauses it for what the
provider asked (Retry-After, x-ratelimit-reset-*); the pace grows back to the limit over one window once 429s
stop. A store that cannot be reached is waited for, said in the trial's log and the wait metric: requests are
never sent unpaced.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcpfleet.runner.llm import meters
from mcpfleet.runner.llm.pricing import Price, output_ceiling, price_of
from mcpfleet.runner.spec.evalrun import Budget, JudgeSettings, ModelSpec

STORE_URL_ENV = "MCPFLEET_PACE_STORE_URL"  # redis://host:port/db or unix:///path/to/redis.sock
NAMESPACE_ENV = "MCPFLEET_NAMESPACE"  # a trial pod's namespace (the budget keys' and the metrics' label)
# The rate window in seconds: a minute, as the spec's limits are per minute. Tests and the bench shorten it (a
# limit of N per minute is then N per this many seconds, on both sides: the pacer and the scripted provider).
WINDOW_ENV = "MCPFLEET_PACE_WINDOW_SECONDS"
WINDOW_SECONDS = 60.0
# A request's window entry is stamped with its reply's time (after the provider received it), and the window is
# kept this much longer than the provider's: a clock that runs a little fast must not end it early.
WINDOW_MARGIN = 0.02
WINDOW_MARGIN_MIN_SECONDS = 0.25


def effective_window(window: float) -> float:
    """The window the pacer counts requests and tokens in: the provider's, plus the margin."""
    return window + max(window * WINDOW_MARGIN, WINDOW_MARGIN_MIN_SECONDS)


PROMPT_MARGIN = 1.1  # the prompt's estimate is counted this much larger (tokenisers differ from the provider's)
PROMPT_EXTRA_TOKENS = 64
LEASE_GRACE_SECONDS = 60.0  # a request's slot outlives its call's timeout by this much if its process died
STORE_RETRY_SECONDS = 1.0
MIN_FACTOR = 0.1  # the shared pace never drops below this share of the limit after 429s
PREFIX = "mcpfleet:"

LOCAL_NAMESPACE = "local"


class BudgetExhausted(Exception):
    """A request that would take a budget past its ``usd``: not sent."""

    def __init__(self, which: str, usd: float, spent: float, cost: float) -> None:
        self.which, self.usd, self.spent, self.cost = which, usd, spent, cost
        super().__init__(
            f"{which} of {usd:g} USD leaves no room for the next request: {spent:.4f} USD billed so far, and it could "
            f"cost up to {cost:.4f} USD (its prompt and output-token ceiling); not sent"
        )

    @property
    def scope(self) -> str:
        return "run" if self.which == "spec.budget" else "model"


def window_seconds(env: Mapping[str, str] | None = None) -> float:
    try:
        w = float((env or {}).get(WINDOW_ENV) or os.environ.get(WINDOW_ENV) or WINDOW_SECONDS)
    except ValueError:
        return WINDOW_SECONDS
    return w if w > 0 else WINDOW_SECONDS


def account_key(model: ModelSpec, litellm_model: str, api_base: str | None) -> str:
    """The provider account and model a limit belongs to: apiBase, the key's reference (never the key) and the
    LiteLLM model string, hashed into a short Redis key."""
    ref = (
        f"env:{model.api_key_env}"
        if model.api_key_env
        else f"secret:{model.api_key_secret_ref.name}/{model.api_key_secret_ref.key}"
        if model.api_key_secret_ref
        else "none"
    )
    blob = json.dumps([api_base or "", ref, litellm_model])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


# Which run a ledger is: a pod's run UID (an EvalRun deleted and made again is another run), or a local run's
# folder (what the launcher passes): two runs of one name elsewhere never share a budget.
RUN_SCOPE_ENVS = ("MCPFLEET_RUN_UID", "MCPFLEET_PACE_RUN_SCOPE")
RUN_SCOPE_ENV = RUN_SCOPE_ENVS[1]


def run_scope(env: Mapping[str, str]) -> str:
    for name in RUN_SCOPE_ENVS:
        if value := env.get(name) or os.environ.get(name):
            return value
    return ""


def budget_key(namespace: str, run: str, model: str | None, scope: str = "") -> str:
    """The ledger of the run's budget (model None) or of one model's budget in it."""
    return f"{PREFIX}budget:{namespace}/{run}/{scope}" + (f"/{model}" if model else "")


@dataclass(frozen=True)
class BudgetLine:
    key: str
    usd: float
    which: str  # the field, as a user would write it: spec.budget, spec.models[gpt-5].budget

    @property
    def scope(self) -> str:
        return "run" if self.which == "spec.budget" else "model"


@dataclass
class PaceConfig:
    """What one trial's pacer needs (from its TrialSpec and environment); None fields: not limited."""

    url: str
    labels: tuple[str, str, str]  # namespace, run, model (the metrics')
    account: str
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    max_in_flight: int | None = None
    budgets: tuple[BudgetLine, ...] = ()
    price: Price | None = None
    output_ceiling: int = 0
    send_max_tokens: bool = False
    window: float = WINDOW_SECONDS
    lease: float = 600.0

    @property
    def rate_limited(self) -> bool:
        return bool(self.requests_per_minute or self.tokens_per_minute or self.max_in_flight)


def needs_pace(model: ModelSpec, run_budget: Budget | None) -> bool:
    return model.rate_limit is not None or model.budget is not None or run_budget is not None


def judge_needs_pace(judge: JudgeSettings | None, run_budget: Budget | None) -> bool:
    """Whether a judge's calls ask the pace store: it has a rateLimit (its own or a same-account model's), or its
    spend counts toward the run's budget."""
    return judge is not None and (judge.rate_limit is not None or run_budget is not None)


def pace_config(
    model: ModelSpec,
    litellm_model: str,
    api_base: str | None,
    run: str,
    run_budget: Budget | None,
    env: Mapping[str, str],
    call_timeout: float,
) -> PaceConfig | None:
    """The trial's pacing, or None when its model has no rateLimit and no budget covers it. Raises RuntimeError
    when it needs a store and none is configured (never unpaced)."""
    if not needs_pace(model, run_budget):
        return None
    url = env.get(STORE_URL_ENV) or os.environ.get(STORE_URL_ENV)
    if not url:
        raise RuntimeError(
            f"model '{model.name}' sets rateLimit or a budget applies, but no pace store is configured ({STORE_URL_ENV}"
            "; the chart's pace.storeUrl): its requests are not sent unpaced"
        )
    namespace = env.get(NAMESPACE_ENV) or os.environ.get(NAMESPACE_ENV) or LOCAL_NAMESPACE
    budgets = []
    if model.budget is not None:
        key = budget_key(namespace, run, model.name, run_scope(env))
        budgets.append(BudgetLine(key, model.budget.usd, model_budget(model.name)))
    if run_budget is not None:
        budgets.append(BudgetLine(budget_key(namespace, run, None, run_scope(env)), run_budget.usd, "spec.budget"))
    price = price_of(model)
    if budgets and price is None:  # (validate refuses this first)
        raise RuntimeError(f"spec.models[{model.name}].pricing: a budget applies but the model has no known price")
    ceiling, send = output_ceiling(model, litellm_model) if budgets or model.rate_limit else (0, False)
    rl = model.rate_limit
    return PaceConfig(
        url=url,
        labels=(namespace, run, model.name),
        account=account_key(model, litellm_model, api_base),
        requests_per_minute=rl.requests_per_minute if rl else None,
        tokens_per_minute=rl.tokens_per_minute if rl else None,
        max_in_flight=rl.max_concurrent_requests if rl else None,
        budgets=tuple(budgets),
        price=price,
        output_ceiling=ceiling,
        send_max_tokens=send and bool(budgets),
        window=window_seconds(env),
        lease=call_timeout + LEASE_GRACE_SECONDS,
    )


def model_budget(name: str) -> str:
    return f"spec.models[{name}].budget"


# -- the store's scripts --------------------------------------------------------------------------------------
# KEYS: req (zset id->sent), tok (zset id->sent), tokn (hash id->tokens), fly (zset id->lease end), state (hash:
# factor, since), then per budget: ledger (hash: spent), res (zset id->lease end), amt (hash id->reserved usd).
# Redis's own clock (TIME) for every pod alike.

_COMMON = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local function factor_now(window)
  local f = tonumber(redis.call('HGET', KEYS[5], 'factor') or '1')
  local since = tonumber(redis.call('HGET', KEYS[5], 'since') or '0')
  if f >= 1 then return 1 end
  return math.min(1, f + (1 - f) * math.max(0, now - since) / window)
end
local function expire_budgets(nb)
  for i = 1, nb do
    local ledger, res, amt = KEYS[5 + 3 * i - 2], KEYS[5 + 3 * i - 1], KEYS[5 + 3 * i]
    -- a reservation whose process died: counted as spent in full (what it may have been billed)
    for _, r in ipairs(redis.call('ZRANGEBYSCORE', res, '-inf', now)) do
      local a = tonumber(redis.call('HGET', amt, r) or '0')
      redis.call('HINCRBYFLOAT', ledger, 'spent', a)
      redis.call('HDEL', amt, r)
      redis.call('ZREM', res, r)
    end
  end
end
"""

ACQUIRE = (
    _COMMON
    + """
local id = ARGV[1]
local window, rpm, tpm, maxfly = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local tokens, lease, cost, nb = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local wait, why = 0, ''
local function later(s, reason) if s > wait then wait, why = s, reason end end
expire_budgets(nb)
for i = 1, nb do
  local ledger, amt = KEYS[5 + 3 * i - 2], KEYS[5 + 3 * i]
  local usd = tonumber(ARGV[9 + i])
  local spent = tonumber(redis.call('HGET', ledger, 'spent') or '0')
  if spent + cost > usd then return {-1, i, tostring(spent)} end
  local reserved = 0
  for _, v in ipairs(redis.call('HVALS', amt)) do reserved = reserved + tonumber(v) end
  if spent + reserved + cost > usd then later(0.25, 'budget') end
end
local f = factor_now(window)
local pause = tonumber(redis.call('HGET', KEYS[5], 'pause') or '0')
if pause > now then later(pause - now, 'rate_limited') end
if rpm > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
  local limit = math.max(1, math.floor(rpm * f))
  local n = redis.call('ZCARD', KEYS[1])
  if n >= limit then
    local e = redis.call('ZRANGE', KEYS[1], n - limit, n - limit, 'WITHSCORES')
    local at = tonumber(e[2])
    if at > now then later(0.1, 'requests') else later(at + window - now, 'requests') end
  end
end
if tpm > 0 then
  for _, old in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - window)) do
    redis.call('HDEL', KEYS[3], old)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
  local limit = math.max(1, math.floor(tpm * f))
  local entries = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  local used = 0
  for j = 1, #entries, 2 do used = used + tonumber(redis.call('HGET', KEYS[3], entries[j]) or '0') end
  if used > 0 and used + tokens > limit then
    local freed = 0
    local until_t = now + window
    for j = 1, #entries, 2 do
      freed = freed + tonumber(redis.call('HGET', KEYS[3], entries[j]) or '0')
      if used - freed + tokens <= limit then
        local at = tonumber(entries[j + 1])
        until_t = (at > now) and (now + 0.1) or (at + window)
        break
      end
    end
    later(until_t - now, 'tokens')
  end
end
if maxfly > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  local limit = math.max(1, math.floor(maxfly * f))
  if redis.call('ZCARD', KEYS[4]) >= limit then later(0.05, 'in_flight') end
end
if wait > 0 then return {0, tostring(wait), why} end
-- In flight, an entry is stamped at its lease's end: it counts until it is settled, and is then stamped with the
-- reply's time, which is after the provider received it (never before: the provider's window ends no later).
if rpm > 0 then
  redis.call('ZADD', KEYS[1], now + lease, id)
  redis.call('PEXPIRE', KEYS[1], math.ceil((window + lease) * 2000))
end
if tpm > 0 then
  redis.call('ZADD', KEYS[2], now + lease, id)
  redis.call('HSET', KEYS[3], id, tokens)
  redis.call('PEXPIRE', KEYS[2], math.ceil((window + lease) * 2000))
  redis.call('PEXPIRE', KEYS[3], math.ceil((window + lease) * 2000))
end
if maxfly > 0 then
  redis.call('ZADD', KEYS[4], now + lease, id)
  redis.call('PEXPIRE', KEYS[4], math.ceil(lease * 2000))
end
for i = 1, nb do
  redis.call('ZADD', KEYS[5 + 3 * i - 1], now + lease, id)
  redis.call('HSET', KEYS[5 + 3 * i], id, cost)
end
return {1, tostring(now)}
"""
)

SETTLE = (
    _COMMON
    + """
local id = ARGV[1]
local tokens, cost, nb = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local limited, pause_s, window = ARGV[5] == '1', tonumber(ARGV[6]), tonumber(ARGV[7])
redis.call('ZREM', KEYS[4], id)
if redis.call('ZSCORE', KEYS[1], id) then redis.call('ZADD', KEYS[1], 'XX', now, id) end
if redis.call('ZSCORE', KEYS[2], id) then redis.call('ZADD', KEYS[2], 'XX', now, id) end
if redis.call('HEXISTS', KEYS[3], id) == 1 then redis.call('HSET', KEYS[3], id, tokens) end
local spent = {}
for i = 1, nb do
  local ledger, res, amt = KEYS[5 + 3 * i - 2], KEYS[5 + 3 * i - 1], KEYS[5 + 3 * i]
  if redis.call('ZREM', res, id) == 1 then
    redis.call('HDEL', amt, id)
    redis.call('HINCRBYFLOAT', ledger, 'spent', cost)
  end
  spent[i] = tostring(redis.call('HGET', ledger, 'spent') or '0')
end
if limited then
  local f = factor_now(window)
  redis.call('HSET', KEYS[5], 'factor', tostring(math.max(tonumber(ARGV[8]), f / 2)), 'since', tostring(now))
end
if pause_s > 0 then
  local pause = tonumber(redis.call('HGET', KEYS[5], 'pause') or '0')
  if now + pause_s > pause then redis.call('HSET', KEYS[5], 'pause', tostring(now + pause_s)) end
end
redis.call('PEXPIRE', KEYS[5], math.ceil(window * 10000))
return spent
"""
)

SPENT = """
local out = {}
for i, k in ipairs(KEYS) do out[i] = tostring(redis.call('HGET', k, 'spent') or '0') end
return out
"""


# -- clients, one per event loop and store ----------------------------------------------------------------------

_clients: dict[str, tuple[asyncio.AbstractEventLoop, Any]] = {}


def client_for(url: str) -> Any:
    """The process's client of the store for the running loop (a warm worker's one loop keeps its connections)."""
    import redis.asyncio as aioredis

    loop = asyncio.get_running_loop()
    held = _clients.get(url)
    if held is not None and held[0] is loop:
        return held[1]
    c = aioredis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2, decode_responses=True)
    _clients[url] = (loop, c)
    return c


def store_errors() -> tuple[type[BaseException], ...]:
    import redis.exceptions as rexc

    return (rexc.ConnectionError, rexc.TimeoutError, OSError)


@dataclass
class Ticket:
    id: str
    tokens: int  # reserved
    cost: float  # reserved
    waited: float = 0.0


@dataclass
class Pacer:
    """One trial's view of its model's shared pace and budgets."""

    config: PaceConfig
    log: Callable[[str], None] | None = None
    waited: float = 0.0  # over the trial's requests (given back to the agent's clock by the caller)
    _unreachable_since: float | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        cfg = self.config
        if cfg.requests_per_minute:
            meters.RATE_LIMIT.labels(*cfg.labels).set(cfg.requests_per_minute)
        for b in cfg.budgets:
            meters.BUDGET_LIMIT.labels(*cfg.labels, b.scope).set(b.usd)
            meters.BUDGET_SPENT.labels(*cfg.labels, b.scope)  # (at zero until the first settlement says)

    def _keys(self) -> list[str]:
        a = f"{PREFIX}pace:{self.config.account}"
        keys = [f"{a}:req", f"{a}:tok", f"{a}:tokn", f"{a}:fly", f"{a}:state"]
        for b in self.config.budgets:
            keys += [b.key, f"{b.key}:res", f"{b.key}:amt"]
        return keys

    def estimate(self, litellm_model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        """Prompt tokens plus the output ceiling, the prompt counted with a margin."""
        import litellm

        try:
            counted = litellm.token_counter(model=litellm_model, messages=messages, tools=tools or None)  # type: ignore[arg-type]
            prompt = int(counted)
        except Exception:  # noqa: BLE001 - a tokeniser LiteLLM lacks: characters / 3, an overestimate
            prompt = len(json.dumps(messages)) // 3 + len(json.dumps(tools)) // 3
        return math.ceil(prompt * PROMPT_MARGIN) + PROMPT_EXTRA_TOKENS + self.config.output_ceiling

    def _note(self, text: str) -> None:
        if self.log is not None:
            self.log(f"{_now()} pace: {text}")

    async def _call(self, script: str, keys: list[str], args: list[Any]) -> Any:
        """Run a script; while the store cannot be reached, wait and say so (never go on without it)."""
        c = client_for(self.config.url)
        while True:
            try:
                out = await c.eval(script, len(keys), *keys, *args)
            except store_errors() as exc:
                now = time.monotonic()
                if self._unreachable_since is None:
                    self._unreachable_since = now
                    self._note(
                        f"the pace store cannot be reached ({type(exc).__name__}); requests wait for it, none is sent "
                        "unpaced"
                    )
                meters.PACE_STORE_DOWN.labels(*self.config.labels).set(1)
                await asyncio.sleep(STORE_RETRY_SECONDS)
                meters.PACE_WAIT.labels(*self.config.labels, "store_unreachable").inc(STORE_RETRY_SECONDS)
                self.waited += STORE_RETRY_SECONDS
                continue
            if self._unreachable_since is not None:
                self._note(f"the pace store is back after {time.monotonic() - self._unreachable_since:.1f} s")
                self._unreachable_since = None
                meters.PACE_STORE_DOWN.labels(*self.config.labels).set(0)
            return out

    async def acquire(
        self,
        litellm_model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        tokens: int | None = None,
    ) -> Ticket:
        """Wait until the request may be sent; raises BudgetExhausted when it may never be. ``tokens``: the
        request's count (prompt plus output ceiling) when known, else estimated from the messages and tools."""
        cfg = self.config
        tokens = self.estimate(litellm_model, messages, tools) if tokens is None else tokens
        cost = cfg.price.cost(tokens - cfg.output_ceiling, cfg.output_ceiling) if cfg.price else 0.0
        ticket = Ticket(uuid.uuid4().hex, tokens, cost)
        args: list[Any] = [
            ticket.id,
            effective_window(cfg.window),
            cfg.requests_per_minute or 0,
            cfg.tokens_per_minute or 0,
            cfg.max_in_flight or 0,
            tokens,
            cfg.lease,
            repr(cost),
            len(cfg.budgets),
            *[repr(b.usd) for b in cfg.budgets],
        ]
        keys = self._keys()
        started = time.monotonic()
        said: str | None = None
        meters.PACE_WAITING.labels(*cfg.labels).inc()
        try:
            while True:
                out = await self._call(ACQUIRE, keys, args)
                code = int(out[0])
                if code == 1:
                    break
                if code == -1:
                    b = cfg.budgets[int(out[1]) - 1]
                    raise BudgetExhausted(b.which, b.usd, float(out[2]), cost)
                wait, why = float(out[1]), str(out[2])
                if why != said and wait > 1:
                    self._note(f"waiting {wait:.1f} s ({why})")
                    said = why
                wait = min(wait, 5.0) * random.uniform(1.0, 1.05) + 0.005  # spread, and look again at least every 5 s
                await asyncio.sleep(wait)
                meters.PACE_WAIT.labels(*cfg.labels, why).inc(wait)
        finally:
            meters.PACE_WAITING.labels(*cfg.labels).dec()
        ticket.waited = time.monotonic() - started
        self.waited += ticket.waited
        return ticket

    async def settle(
        self,
        ticket: Ticket,
        *,
        prompt_tokens: int = 0,
        output_tokens: int = 0,
        charge_reservation: bool = False,
        rate_limited: bool = False,
        pause_s: float | None = None,
    ) -> float:
        """Replace the reservation with what was used; returns the cost settled. ``charge_reservation``: the
        request may have been billed without a reply (a timeout, a dropped connection): it is charged in full.
        ``rate_limited``: the provider said 429 (the shared pace halves); ``pause_s``: how long it asked for."""
        cfg = self.config
        if charge_reservation:
            tokens, cost = ticket.tokens, ticket.cost
        else:
            tokens = prompt_tokens + output_tokens
            cost = cfg.price.cost(prompt_tokens, output_tokens) if cfg.price else 0.0
        pause = pause_s if pause_s is not None else (1.0 if rate_limited else 0.0)
        args: list[Any] = [
            ticket.id,
            tokens,
            repr(cost),
            len(cfg.budgets),
            "1" if rate_limited else "0",
            repr(max(0.0, pause)),
            effective_window(cfg.window),
            repr(MIN_FACTOR),
        ]
        ledgers = await self._call(SETTLE, self._keys(), args)
        for b, spent_usd in zip(cfg.budgets, ledgers or [], strict=False):
            meters.BUDGET_SPENT.labels(*cfg.labels, b.scope).set(float(spent_usd))
        if rate_limited:
            self._note(f"429 from the provider: the shared pace slows down (pause {pause:.1f} s)")
        return cost


async def current_factor(url: str, account: str, window: float | None = None) -> float:
    """The share of the account's limit the shared pace allows now (1: all of it; less for a while after a 429)."""
    keys = [f"{PREFIX}pace:{account}:{k}" for k in ("req", "tok", "tokn", "fly", "state")]
    script = _COMMON + "return tostring(factor_now(tonumber(ARGV[1])))"
    w = effective_window(window or window_seconds())
    return float(await client_for(url).eval(script, len(keys), *keys, repr(w)))


async def spent(url: str, keys: list[str]) -> list[float]:
    """What the ledgers say was spent (settled, and reservations whose process died)."""
    out = await client_for(url).eval(SPENT, len(keys), *keys)
    return [float(x) for x in out]


async def seed(url: str, amounts: Mapping[str, float]) -> None:
    """Start ledgers at what an earlier invocation of the run spent (a resume): a budget covers the whole run."""
    c = client_for(url)
    for key, usd in amounts.items():
        await c.hset(key, "spent", repr(float(usd)))


async def close_clients() -> None:
    """Close this loop's clients (a worker's exit, a test's end)."""
    loop = asyncio.get_running_loop()
    for url, (owner, c) in list(_clients.items()):
        if owner is loop:
            _clients.pop(url, None)
            try:
                await c.aclose()
            except Exception:  # noqa: BLE001
                pass


def pause_from_headers(headers: Mapping[str, Any]) -> float | None:
    """Seconds until an exhausted limit resets, from a successful reply's x-ratelimit-* headers (the provider says
    the account has nothing left: the next request would be a 429), else None."""
    from mcpfleet.runner.llm.faults import retry_after_seconds

    h = {str(k).lower().removeprefix("llm_provider-"): str(v) for k, v in headers.items()}
    exhausted = [k for k, v in h.items() if "ratelimit-remaining" in k and v.strip() in ("0", "0.0")]
    if not exhausted:
        return None
    resets = {k: v for k, v in h.items() if k in {e.replace("remaining", "reset") for e in exhausted}}
    return retry_after_seconds(resets) if resets else None


def _now() -> str:
    return time.strftime("%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
