// Cashier page client (served from /cashier/assets/cashier.js, same origin, no dependencies).
// Polls <page>/status every 2 s while visible, keeps the countdown, runs the sandbox buttons and, inside
// WeChat, hands the signed JSAPI parameters to WeChat's own payment sheet (WeixinJSBridge, which WeChat
// injects itself: no script is loaded for it). When the state changes it fetches the page again and
// swaps its <main> in place (no reload): the server stays the only place that decides what a state
// shows, and final states never carry payment material. WeChat's answer is only a hint: the order is
// paid when WeChat Pay notifies the service (or a query finds it), which the polling shows.
// Every text it shows comes from the page (data-* attributes), in the page's language.
{
  const POLL_MS = 2000;
  const FINAL = new Set(['PAID', 'EXPIRED', 'CLOSED', 'SUPERSEDED', 'FAILED']);
  const page = window.location.pathname.replace(/\/+$/, '');
  // The way to pay the buyer is on (`?via=`, `&payer=`) stays with every fetch of the page and every action.
  const search = window.location.search;
  let root = document.getElementById('cashier');
  let state = root.dataset.state;
  let deadline = Date.now() + Number(root.dataset.secondsLeft || 0) * 1000;
  let pollTimer = null;
  let expiryPolled = false;

  /** The time left with the templates the countdown element carries (the server's formatDuration, i18n.ts). */
  const duration = (el, seconds) => {
    const s = Math.max(0, Math.floor(seconds));
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    const parts = { h, m, mm: String(m).padStart(2, '0'), ss: String(s % 60).padStart(2, '0') };
    const template = h > 0 ? el.dataset.formatHours : el.dataset.formatMinutes;
    return template.replace(/\{(\w+)\}/g, (all, k) => (k in parts ? String(parts[k]) : all));
  };

  const tick = () => {
    const el = root.querySelector('[data-countdown]');
    if (!el) return;
    const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
    el.textContent = duration(el, left);
    // At zero, ask the server at once instead of waiting for the next poll.
    if (left === 0 && !expiryPolled && !FINAL.has(state)) {
      expiryPolled = true;
      void poll();
    }
  };

  const swapPage = async () => {
    // The new <main> in this page's language, whatever the browser would ask for now.
    const res = await fetch(page + search, {
      cache: 'no-store',
      credentials: 'same-origin',
      headers: { 'Accept-Language': document.documentElement.lang },
    });
    const doc = new window.DOMParser().parseFromString(await res.text(), 'text/html');
    const next = doc.getElementById('cashier');
    if (!next) return;
    const adopted = document.adoptNode(next);
    root.replaceWith(adopted);
    root = adopted;
    state = root.dataset.state;
    deadline = Date.now() + Number(root.dataset.secondsLeft || 0) * 1000;
    bind();
  };

  /** Applies a status body ({state, expireAt, secondsLeft}); re-renders when the state changed. */
  const apply = async (status) => {
    deadline = Date.now() + status.secondsLeft * 1000;
    if (status.secondsLeft > 0) expiryPolled = false;
    if (status.state !== state) {
      state = status.state;
      await swapPage();
    }
  };

  const schedule = () => {
    window.clearTimeout(pollTimer);
    pollTimer = FINAL.has(state) ? null : window.setTimeout(poll, POLL_MS);
  };

  async function poll() {
    // A hidden tab does not poll; it asks again as soon as the buyer comes back (e.g. from the Alipay app).
    if (document.hidden) return;
    try {
      const res = await fetch(`${page}/status`, { cache: 'no-store', credentials: 'same-origin' });
      if (res.ok) await apply(await res.json());
    } catch {
      // Network hiccup: try again at the next poll.
    } finally {
      schedule();
    }
  }

  const act = async (action) => {
    const buttons = root.querySelectorAll('[data-sandbox-action]');
    const error = root.querySelector('[data-error]');
    buttons.forEach((b) => (b.disabled = true));
    if (error) error.hidden = true;
    try {
      // The custom header makes any cross-site attempt a CORS preflight, which this server never approves.
      const res = await fetch(`${page}/sandbox/${action}${search}`, {
        method: 'POST',
        cache: 'no-store',
        credentials: 'same-origin',
        headers: { 'X-Cashier-Request': 'sandbox' },
      });
      const body = await res.json().catch(() => null);
      if (body && typeof body.state === 'string') await apply(body);
      // The JSON's message is for machines (English); the buyer reads the page's own words.
      if (!res.ok && error && root.contains(error)) {
        error.textContent = error.dataset.errorFailed;
        error.hidden = false;
      }
    } catch {
      if (error && root.contains(error)) {
        error.textContent = error.dataset.errorNetwork;
        error.hidden = false;
      }
    } finally {
      buttons.forEach((b) => (b.disabled = false));
      schedule();
    }
  };

  /** WeChat's payment sheet for the signed parameters the button carries (JSAPI调起支付). */
  const payInWechat = (button) => {
    const error = root.querySelector('[data-jsapi-error]');
    const show = (text) => {
      if (error && root.contains(error)) {
        error.textContent = text;
        error.hidden = false;
      }
    };
    if (error) error.hidden = true;
    const d = button.dataset;
    const params = {
      appId: d.appId,
      timeStamp: d.timeStamp,
      nonceStr: d.nonceStr,
      package: d.package,
      signType: d.signType,
      paySign: d.paySign,
    };
    const invoke = () => {
      button.disabled = true;
      window.WeixinJSBridge.invoke('getBrandWCPayRequest', params, (res) => {
        button.disabled = false;
        // ok: ask the server now (the payment is the provider's to confirm); cancel or fail: the buyer may try again.
        if (res && res.err_msg === 'get_brand_wcpay_request:ok') void poll();
        else if (error) show(error.dataset.errorCancelled);
      });
    };
    if (window.WeixinJSBridge) return invoke();
    // WeChat injects its bridge shortly after the page loads; outside WeChat it never comes.
    const waited = window.setTimeout(() => error && show(error.dataset.errorBridge), 3000);
    document.addEventListener(
      'WeixinJSBridgeReady',
      () => {
        window.clearTimeout(waited);
        invoke();
      },
      { once: true },
    );
  };

  function bind() {
    root.querySelectorAll('[data-sandbox-action]').forEach((b) => {
      b.addEventListener('click', () => void act(b.dataset.sandboxAction));
    });
    root.querySelectorAll('[data-jsapi]').forEach((b) => {
      b.addEventListener('click', () => payInWechat(b));
    });
    tick();
  }

  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && !FINAL.has(state)) void poll();
  });
  bind();
  window.setInterval(tick, 1000);
  schedule();
}
