/**
 * A refusal of the portal API or the admin API as the pages show it. The APIs answer
 * `{code, message}` in English for every client (the CLI, scripts, tests), and keep doing so. In
 * English a page shows the message as it came; in zh-CN it shows a Chinese text (refusalText of
 * src/ui/i18n.ts, used by ErrorNote), with the code after it and the server's words in its title:
 *
 *  1. the message's own translation when it is one of ERROR_MESSAGES_ZH (English templates whose
 *     `{names}` stand for the parts that vary; a `{field}` is named by FIELDS_ZH, an `{entity}` by
 *     ENTITIES_ZH, an `{at}` is shown in Asia/Shanghai, a pattern's `{rule}` is put in words);
 *  2. else the text of its stable code (ERROR_CODES_ZH, by the code without its surface's prefix:
 *     ADMIN_NOT_FOUND and PORTAL_NOT_FOUND say the same);
 *  3. else, for a code without a translation, the server's message.
 *
 * test/unit/ui-i18n.test.ts checks that every code the portal API and the admin API can answer has
 * its text, that every body field of the back office and every entity the APIs name has its name,
 * that each template is still a message the server gives, and that the messages of the shared
 * checks (body schemas, passwords, sign-in, notify URLs) are translated, not only their code.
 */
import { time } from './format.ts';

/**
 * The codes' texts, by the code without its prefix (`ADMIN_`, `PORTAL_`). The pages' own codes:
 * NETWORK_FAILED (no answer reached the page) and HTTP_ERROR (an answer that is not the API's JSON).
 */
export const ERROR_CODES_ZH: Record<string, string> = {
  UNAUTHORIZED: '未登录或登录已失效，请重新登录。',
  FORBIDDEN: '没有执行此操作的权限。',
  RATE_LIMITED: '操作过于频繁，请稍后再试。',
  VALIDATION_FAILED: '输入有误，请检查后重试。',
  NOT_FOUND: '未找到要查看的内容。',
  CONFLICT: '与已有数据冲突。',
  STATE_INVALID: '当前状态下不能执行此操作。',
  PROVIDER_REJECTED: '支付渠道拒绝了此操作。',
  UNAVAILABLE: '服务暂时不可用，请稍后再试。',
  TOTP_REQUIRED: '请输入身份验证器应用中的验证码。',
  NETWORK_FAILED: '无法连接到服务，请检查网络后重试。',
  HTTP_ERROR: '服务没有正常应答，请稍后再试。',
};

/** The messages the server gives, by their English text (the template), in zh-CN. */
export const ERROR_MESSAGES_ZH: Record<string, string> = {
  // signing in, sessions, the browser's requests
  'the name or the password is not right': '用户名或密码不正确。',
  'too many failed sign-ins: try again later': '登录失败次数过多，请稍后再试。',
  'too many sign-ins at once: try again in a moment': '同时登录的请求过多，请稍后再试。',
  'enter the code of your authenticator app': '请输入身份验证器应用中的验证码。',
  'the code is not right': '验证码不正确。',
  'the code is not right: check the time of the device': '验证码不正确：请检查设备的时间。',
  'sign in first': '请先登录。',
  'a valid admin bearer token is required': '需要有效的管理令牌。',
  'a request from another site is refused': '不接受来自其他网站的请求。',
  'a request that changes something needs its session CSRF token (X-CSRF-Token)': '此操作缺少会话的 CSRF 令牌，请刷新页面后重试。',
  'the role {role} does not allow this ({permission})': '角色 {role} 无权执行此操作（{permission}）。',
  'Content-Type must be application/json': '请求的 Content-Type 必须为 application/json。',
  // passwords and the second factor
  'the current password is not right': '当前密码不正确。',
  'the password must have at least {n} characters': '密码至少需要 {n} 个字符。',
  'the password must have at most {n} characters': '密码最多 {n} 个字符。',
  'the password must not start or end with a space': '密码不能以空格开头或结尾。',
  'start the setup first': '请先开始设置。',
  'TOTP is not on': '尚未开启第二重验证。',
  // merchant users and operators
  'the login {login} is taken': '登录名 {login} 已被使用。',
  'login must be 3 to 128 characters: lower-case letters, digits, ".", "_", "+", "@" or "-", starting with a letter or digit':
    '登录名须为 3 至 128 个字符：小写字母、数字、“.”、“_”、“+”、“@” 或 “-”，并以字母或数字开头。',
  'the user is disabled: enable it first': '该用户已停用：请先启用。',
  'the user never accepted its invitation: send a new invitation': '该用户尚未接受邀请：请重新发送邀请。',
  'this is the merchant’s last owner: make another user owner first': '这是商户唯一的所有者：请先将其他用户设为所有者。',
  'an operator named {name} already exists': '已有名为 {name} 的操作员。',
  'name must be 2 to 64 characters: lower-case letters, digits, ".", "_" or "-", starting with a letter or digit':
    '名称须为 2 至 64 个字符：小写字母、数字、“.”、“_” 或 “-”，并以字母或数字开头。',
  'this is the last active admin: make another operator admin first': '这是最后一位在用的管理员：请先将其他操作员设为管理员。',
  'the ADMIN_TOKEN has no password': 'ADMIN_TOKEN 没有密码。',
  'the operator is disabled': '该操作员已停用。',
  // apps and keys
  'publicKeyPem holds a private key; register only the public key': '提交的是私钥：只能登记公钥。',
  'publicKeyPem must be one PEM public key (-----BEGIN PUBLIC KEY-----)': '公钥须为一个 PEM 格式的公钥（-----BEGIN PUBLIC KEY-----）。',
  'publicKeyPem cannot be parsed': '无法解析该公钥。',
  'publicKeyPem must be an RSA key of 2048 to 4096 bits': '公钥须为 2048 至 4096 位的 RSA 密钥。',
  'key {keyId} already exists for this app': '该应用已有密钥 {keyId}。',
  'the key is no longer valid': '该密钥已失效。',
  'no other key of the app stays valid after that time: add the new key first': '届时该应用将没有其他有效密钥：请先添加新密钥。',
  'afterSeconds must be 0 to {max}': '过渡时长须为 0 至 {max} 秒。',
  'notifyUrl: must be an absolute URL': '通知地址须为完整的 URL。',
  'notifyUrl: must not contain user info': '通知地址不能包含用户名或密码。',
  'notifyUrl: must not contain a fragment': '通知地址不能包含片段（#）。',
  'notifyUrl: must use https (plain http is allowed only to a loopback host where WEBHOOK_ALLOW_LOOPBACK is on)':
    '通知地址须使用 https（仅在开启 WEBHOOK_ALLOW_LOOPBACK 时可用 http 访问本机地址）。',
  'notifyUrl: must use https': '通知地址须使用 https。',
  'notifyUrl: must not point at a private, link-local or reserved address': '通知地址不能指向私有、链路本地或保留地址。',
  'notifyUrl: must not point at a loopback address': '通知地址不能指向本机地址。',
  '{field}: invalid CIDR list entry {entry}: {why}': '{field}：{entry} 不是有效的 IP 地址或网段。',
  'allowIpv4 and allowIpv6 cannot both be false: every source would be refused': '不能同时禁止 IPv4 和 IPv6：否则所有来源都会被拒绝。',
  // settlement: accounts, allocation
  'participants: {account} is not a settlement account of this merchant': '{account} 不是该商户的结算账户。',
  'SINGLE takes exactly one participant': 'SINGLE 模式只能有一个参与方。',
  'RATIO requires ratios': 'RATIO 模式需要填写分账比例。',
  'RATIO takes 2 to 4 participants': 'RATIO 模式需要 2 至 4 个参与方。',
  'ratios must name each participant exactly once': '分账比例须对每个参与方各列一次。',
  'ratios shareBps must sum to 10000 (got {sum})': '分账比例之和须为 10000（当前为 {sum}）。',
  'ratios are allowed only with mode RATIO': '只有 RATIO 模式才能填写分账比例。',
  // orders, events, statements, reconciliation
  'the provider rejected the close; the order is unchanged': '支付渠道拒绝关闭，订单未改变。',
  'the provider rejected the operation': '支付渠道拒绝了此操作。',
  'The order has already been paid; query the order.': '订单已支付，请查询订单。',
  'The order has failed; it cannot be closed.': '订单已失败，无法关闭。',
  'the event is already queued for delivery': '该事件已在投递队列中。',
  'an event can be delivered again once a minute, and 20 events of an app a minute':
    '同一事件每分钟只能重新投递一次，每个应用每分钟最多重新投递 20 个事件。',
  'Redelivery is limited to one request per event a minute and 20 events of an app a minute.':
    '同一事件每分钟只能重新投递一次，每个应用每分钟最多重新投递 20 个事件。',
  'The statement of {day} is not closed yet: it is available from {at}.': '{day} 的对账单尚未结束，{at} 起可下载。',
  'compression must be gzip or none': '压缩方式须为 gzip 或 none。',
  'day must be a date YYYY-MM-DD': '日期须为 YYYY-MM-DD 格式。',
  'day must not be later than today (Asia/Shanghai)': '日期不能晚于今天（Asia/Shanghai）。',
  'the provider {provider} gives no statement to reconcile with': '支付渠道 {provider} 不提供可用于对账的账单。',
  // what any request can be refused for
  '{entity} not found': '未找到{entity}。',
  'no route {method} {path}': '没有此接口：{method} {path}。',
  'a JSON body is required': '请求需要 JSON 内容。',
  'body too large': '请求内容过大。',
  'a value contains a character that cannot be stored (U+0000)': '内容中含有无法保存的字符（U+0000）。',
  'the service is temporarily unavailable': '服务暂时不可用，请稍后再试。',
  'the query parameters are {names}': '查询参数只能是 {names}。',
  // the checks of a body or a query (src/domain/schema.ts, src/backoffice-http/query.ts)
  '{field} must be a string, not {what}': '{field}须为文本。',
  '{field} must not contain the NUL character (U+0000)': '{field}不能包含 NUL 字符（U+0000）。',
  '{field} must not contain a lone surrogate (ill-formed Unicode)': '{field}含有无效的 Unicode 字符。',
  '{field} must be exactly {value}': '{field}须为 {value}。',
  '{field} must be one of {values}': '{field}须为以下之一：{values}。',
  '{field} must have at least {n} character': '{field}至少需要 {n} 个字符。',
  '{field} must have at least {n} characters': '{field}至少需要 {n} 个字符。',
  '{field} must have at most {n} character': '{field}最多 {n} 个字符。',
  '{field} must have at most {n} characters': '{field}最多 {n} 个字符。',
  '{field} has an invalid format': '{field}格式不正确。',
  '{field} has an invalid format ({rule})': '{field}格式不正确（须为 {rule}）。',
  '{field} must be an integer, not {what}': '{field}须为整数。',
  '{field} must be at least {n}': '{field}不能小于 {n}。',
  '{field} must be at most {n}': '{field}不能大于 {n}。',
  '{field} must be true or false': '{field}须为是或否。',
  '{field} must be an array, not {what}': '{field}须为列表。',
  '{field} must have at least {n} items': '{field}至少需要 {n} 项。',
  '{field} must have at most {n} items': '{field}最多 {n} 项。',
  '{field} must not repeat items': '{field}不能有重复项。',
  '{field} must be a JSON object, not {what}': '{field}须为 JSON 对象。',
  '{field} is not a known field': '{field}不是可接受的字段。',
  '{field} is required': '请填写{field}。',
  '{field} must have at least {n} field(s)': '{field}至少需要 {n} 个字段。',
  '{field} must be given once': '{field}只能给出一次。',
  '{field} must be {min} to {max}': '{field}须为 {min} 至 {max}。',
  '{field} must be a date (2025-01-31) or an ISO 8601 time with its offset': '{field}须为日期（2025-01-31）或带时区的 ISO 8601 时间。',
  '{field} must be a nextCursor this API answered': '{field}须为本接口返回的 nextCursor。',
  '{field} must be YYYY-MM-DD': '{field}须为 YYYY-MM-DD 格式。',
};

/** The names of the fields the refusals name (the back office's bodies and queries). */
export const FIELDS_ZH: Record<string, string> = {
  body: '请求内容',
  value: '值',
  name: '名称',
  password: '密码',
  currentPassword: '当前密码',
  newPassword: '新密码',
  login: '登录名',
  role: '角色',
  status: '状态',
  label: '标签',
  code: '验证码',
  totpCode: '验证码',
  afterSeconds: '过渡时长',
  entityType: '主体类型',
  entityName: '主体名称',
  merchantNo: '商户号',
  cardNumber: '银行卡号',
  agreedCeilingFen: '约定限额',
  notifyUrl: '通知地址',
  channels: '渠道',
  tradeScopes: '交易形式',
  voidedLinks: '停用的支付链接',
  ipAllowlist: 'IP 白名单',
  paymentWindowSeconds: '支付时限',
  dailyAmountCeilingFen: '每日金额上限',
  rateLimitPerSecond: '每秒请求上限',
  statementDownloadsAtOnce: '同时生成的对账单数',
  keyId: '密钥 ID',
  publicKeyPem: '公钥',
  mode: '分账模式',
  participants: '参与方',
  ratios: '分账比例',
  unavailablePolicy: '账户不可用时的处理',
  ruleVersion: '规则版本',
  standardRateBps: '标准费率',
  largeRateBps: '大额费率',
  thresholdFen: '大额门槛',
  merchantRateBps: '商户费率',
  trustedProxies: '可信代理',
  allowlist: '白名单',
  denylist: '黑名单',
  allowIpv4: '允许 IPv4',
  allowIpv6: '允许 IPv6',
  eventIds: '事件 ID',
  day: '日期',
  provider: '支付渠道',
  operation: '操作',
  outcome: '结果',
  times: '次数',
  delayMs: '延迟',
  appId: '应用 ID',
  openOrderId: '平台订单号',
  outTradeNo: '商户订单号',
  channel: '渠道',
  from: '起始时间',
  to: '截止时间',
  cursor: '翻页位置',
  limit: '条数',
  state: '状态',
  operator: '操作人',
  action: '操作',
  entityId: '对象 ID',
  source: '来源',
  compression: '压缩方式',
  accountId: '账户 ID',
  shareBps: '分账比例（基点）',
  activateAfterSeconds: '生效等待时长',
  attemptId: '尝试 ID',
};

/** What a `{entity} not found` names. */
export const ENTITIES_ZH: Record<string, string> = {
  resource: '所请求的内容',
  order: '订单',
  openOrder: '订单',
  app: '应用',
  key: '密钥',
  merchant: '商户',
  user: '用户',
  invitation: '邀请',
  'TOTP setup': '第二重验证的设置',
  event: '事件',
  operator: '操作员',
  token: '令牌',
  'fee rule': '费率规则',
  allocation: '分账设置',
  'reconciliation run': '对账任务',
  run: '对账任务',
  'open discrepancy': '未处理的差异',
};

/** What stands for each `{name}` of a template: a field's path, a number, anything else. */
const PART: Record<string, string> = {
  field: '([A-Za-z_][\\w.[\\]]*)',
  n: '(\\d+)',
  min: '(\\d+)',
  max: '(\\d+)',
  sum: '(-?\\d+)',
};

interface Template {
  en: string;
  re: RegExp;
  names: string[];
  zh: string;
  /** Its literal characters: of two templates that match, the longer one says more. */
  weight: number;
}

let templates: Template[] | null = null;

function compiled(): Template[] {
  templates ??= Object.entries(ERROR_MESSAGES_ZH).map(([en, zh]) => {
    const names: string[] = [];
    const pieces = en.split(/\{(\w+)\}/);
    const source = pieces
      .map((p, i) => {
        if (i % 2 === 0) return p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        names.push(p);
        return PART[p] ?? '(.+?)';
      })
      .join('');
    const weight = pieces.filter((_, i) => i % 2 === 0).join('').length;
    return { en, re: new RegExp(`^${source}$`), names, zh, weight };
  });
  return templates;
}

function bestTemplate(message: string): { t: Template; m: RegExpExecArray } | null {
  let best: { t: Template; m: RegExpExecArray } | null = null;
  for (const t of compiled()) {
    const m = t.re.exec(message);
    if (m && (best === null || t.weight > best.t.weight)) best = { t, m };
  }
  return best;
}

/** The English template a server message is an instance of, or null. */
export function templateOf(message: string): string | null {
  return bestTemplate(message)?.t.en ?? null;
}

/**
 * A template's part in zh-CN: a field by its name (each name of a path: `ratios[0].shareBps`; as
 * given when the table has none), an
 * entity by its name (null when the table has none), a time in Asia/Shanghai, a pattern's rule
 * (`1-128 characters of visible ASCII`) in words, anything else as it is.
 */
function part(name: string, value: string): string | null {
  if (name === 'field') return value.replace(/[A-Za-z_]\w*/g, (f) => FIELDS_ZH[f] ?? f);
  if (name === 'entity') return ENTITIES_ZH[value] ?? null;
  if (name === 'at') return time(value);
  if (name === 'rule') {
    const m = /^(\d+)-(\d+) characters of (.+)$/.exec(value);
    if (!m) return null;
    return `${m[1]} 至 ${m[2]} 个${m[3] === 'visible ASCII' ? '可见 ASCII 字符' : `字符（${m[3]}）`}`;
  }
  return value;
}

/** The text of a code (its prefix aside), or undefined. */
export function codeTextZh(code: string): string | undefined {
  return ERROR_CODES_ZH[code.replace(/^(ADMIN|PORTAL)_/, '')];
}

/** A refusal in zh-CN: its message's translation, else its code's text, else the message. */
export function refusalZh(code: string, message: string): string {
  const found = bestTemplate(message);
  if (found) {
    const { t, m } = found;
    const vars = new Map<string, string | null>(t.names.map((n, i) => [n, part(n, m[i + 1]!)]));
    // An entity the table does not name: the code's text rather than a half-English sentence.
    if (![...vars.values()].includes(null)) return t.zh.replace(/\{(\w+)\}/g, (s, k: string) => vars.get(k) ?? s);
  }
  return codeTextZh(code) ?? message;
}
