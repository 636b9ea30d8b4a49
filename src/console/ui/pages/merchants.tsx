/** Merchants: the list and creation; one merchant's apps, keys, settlement accounts, allocation and fee rule. */
import { useState } from 'preact/hooks';
import { get, patch, post, put } from '../../../ui/api.ts';
import { ActionNote, Field, Loading, Section, Status, Table, formValues, useAction, useCan, useLoad } from '../../../ui/components.tsx';
import { money, time } from '../../../ui/format.ts';

interface MerchantSummary {
  merchantId: string;
  name: string;
  entityType: string;
  createdAt: string;
}

export function MerchantsPage() {
  const can = useCan();
  const loaded = useLoad(() => get<{ merchants: MerchantSummary[] }>('/merchants'), []);
  const create = useAction();
  return (
    <>
      <h1>Merchants</h1>
      {can('merchants.write') ? (
        <Section title="New merchant">
          <form
            class="inline-form"
            aria-label="New merchant"
            onSubmit={(e) => {
              const v = formValues(e);
              void create.run(async () => {
                const m = await post<{ merchantId: string }>('/merchants', { name: v.name, entityType: v.entityType });
                window.location.hash = `#/merchants/${m.merchantId}`;
              });
            }}
          >
            <Field label="Name">
              <input name="name" required maxLength={128} />
            </Field>
            <Field label="Entity type">
              <select name="entityType">
                <option value="CORPORATE">CORPORATE</option>
                <option value="INDIVIDUAL">INDIVIDUAL</option>
              </select>
            </Field>
            <button type="submit" class="primary" disabled={create.busy}>
              Create merchant
            </button>
          </form>
          <ActionNote action={create} />
        </Section>
      ) : null}
      <Section title="All merchants">
        <Loading loaded={loaded}>
          {(d) => (
            <Table head={['Name', 'Merchant id', 'Entity type', 'Created']} empty={d.merchants.length === 0}>
              {d.merchants.map((m) => (
                <tr key={m.merchantId}>
                  <td>
                    <a href={`#/merchants/${m.merchantId}`}>{m.name}</a>
                  </td>
                  <td class="mono">{m.merchantId}</td>
                  <td>{m.entityType}</td>
                  <td>{time(m.createdAt)}</td>
                </tr>
              ))}
            </Table>
          )}
        </Loading>
      </Section>
    </>
  );
}

interface App {
  appId: string;
  status: string;
  notifyUrl: string | null;
  channels: string[];
  tradeScopes: string[];
  ipAllowlist: string[];
  paymentWindowSeconds: number;
  dailyAmountCeilingFen: number | null;
  rateLimitPerSecond: number;
  createdAt: string;
}

interface Account {
  accountId: string;
  entityType: string;
  entityName: string;
  merchantNo: string;
  cardLast4: string;
  agreedCeilingFen: number | null;
  createdAt: string;
}

interface FeeRule {
  ruleVersion: number;
  standardRateBps: number;
  largeRateBps: number;
  thresholdFen: number;
  merchantRateBps: number;
}

interface Allocation {
  mode: string;
  participants: string[];
  ratios?: { accountId: string; shareBps: number }[] | null;
  unavailablePolicy: string;
}

interface MerchantDetail {
  merchantId: string;
  name: string;
  entityType: string;
  createdAt: string;
  apps: App[];
  settlementAccounts: Account[];
  allocation: Allocation | null;
  feeRule: FeeRule | null;
}

export function MerchantPage({ merchantId }: { merchantId: string }) {
  const loaded = useLoad(() => get<MerchantDetail>(`/merchants/${encodeURIComponent(merchantId)}`), [merchantId]);
  return (
    <>
      <p>
        <a href="#/merchants">← Merchants</a>
      </p>
      <Loading loaded={loaded}>
        {(m) => (
          <>
            <h1>{m.name}</h1>
            <p class="muted">
              <span class="mono">{m.merchantId}</span> · {m.entityType} · created {time(m.createdAt)}
            </p>
            <Apps merchantId={m.merchantId} apps={m.apps} reload={loaded.reload} />
            <Accounts merchant={m} reload={loaded.reload} />
            <AllocationSection merchant={m} reload={loaded.reload} />
            <FeeRuleSection merchant={m} reload={loaded.reload} />
          </>
        )}
      </Loading>
    </>
  );
}

function Apps({ merchantId, apps, reload }: { merchantId: string; apps: App[]; reload: () => void }) {
  const can = useCan();
  const create = useAction();
  return (
    <Section title="Apps">
      {apps.length === 0 ? <p class="muted">No app yet.</p> : null}
      {apps.map((a) => (
        <AppCard key={a.appId} app={a} reload={reload} />
      ))}
      {can('merchants.write') ? (
        <form
          class="inline-form"
          aria-label="New app"
          onSubmit={(e) => {
            const v = formValues(e);
            const channels = ['ALIPAY_H5', 'WECHAT_H5'].filter((c) => v[`channel_${c}`] === 'on');
            void create.run(async () => {
              await post(`/merchants/${merchantId}/apps`, { ...(v.notifyUrl ? { notifyUrl: v.notifyUrl } : {}), channels });
              reload();
            }, 'App created.');
          }}
        >
          <h3>New app</h3>
          <Field label="Notify URL (optional)" hint="https://… where the merchant receives signed events">
            <input name="notifyUrl" type="url" maxLength={512} />
          </Field>
          <fieldset>
            <legend>Channels</legend>
            <label class="check">
              <input type="checkbox" name="channel_ALIPAY_H5" defaultChecked /> ALIPAY_H5
            </label>
            <label class="check">
              <input type="checkbox" name="channel_WECHAT_H5" defaultChecked /> WECHAT_H5
            </label>
          </fieldset>
          <button type="submit" class="primary" disabled={create.busy}>
            Create app
          </button>
          <ActionNote action={create} />
        </form>
      ) : null}
    </Section>
  );
}

interface Key {
  keyId: string;
  status: string;
  publicKeyPem: string;
  createdAt: string;
}

function AppCard({ app, reload }: { app: App; reload: () => void }) {
  const can = useCan();
  const keys = useLoad(() => get<{ keys: Key[] }>(`/apps/${app.appId}/keys`), [app.appId]);
  const change = useAction();
  const upload = useAction();
  const [pem, setPem] = useState('');
  const write = can('merchants.write');
  return (
    <article class="app" data-app={app.appId}>
      <h3>
        <span class="mono">{app.appId}</span> <Status value={app.status} />
      </h3>
      <dl class="facts">
        <dt>Notify URL</dt>
        <dd class="mono">{app.notifyUrl ?? '—'}</dd>
        <dt>Channels</dt>
        <dd>{app.channels.join(', ')}</dd>
        <dt>Trade scopes</dt>
        <dd>{app.tradeScopes.join(', ')}</dd>
        <dt>IP allowlist</dt>
        <dd class="mono">{app.ipAllowlist.length ? app.ipAllowlist.join(', ') : 'any'}</dd>
        <dt>Payment window</dt>
        <dd>{app.paymentWindowSeconds} s</dd>
        <dt>Daily ceiling</dt>
        <dd>{app.dailyAmountCeilingFen === null ? 'none' : money(app.dailyAmountCeilingFen)}</dd>
        <dt>Rate limit</dt>
        <dd>{app.rateLimitPerSecond} / s</dd>
      </dl>
      {write ? (
        <form
          class="inline-form"
          aria-label={`Change app ${app.appId}`}
          onSubmit={(e) => {
            const v = formValues(e);
            void change.run(async () => {
              await patch(`/apps/${app.appId}`, {
                notifyUrl: v.notifyUrl ? v.notifyUrl : null,
                rateLimitPerSecond: Number(v.rateLimitPerSecond),
                ipAllowlist: v.ipAllowlist ? v.ipAllowlist.split(/[\s,]+/).filter(Boolean) : [],
              });
              reload();
            }, 'App changed.');
          }}
        >
          <Field label="Notify URL">
            <input name="notifyUrl" type="url" defaultValue={app.notifyUrl ?? ''} />
          </Field>
          <Field label="Rate limit per second">
            <input name="rateLimitPerSecond" type="number" min={1} max={100000} defaultValue={String(app.rateLimitPerSecond)} />
          </Field>
          <Field label="IP allowlist (CIDRs, empty = any)">
            <input name="ipAllowlist" defaultValue={app.ipAllowlist.join(' ')} />
          </Field>
          <button type="submit" disabled={change.busy}>
            Save app
          </button>
          <button
            type="button"
            class={app.status === 'ACTIVE' ? 'danger' : ''}
            disabled={change.busy}
            onClick={() =>
              void change.run(async () => {
                await patch(`/apps/${app.appId}`, { status: app.status === 'ACTIVE' ? 'DISABLED' : 'ACTIVE' });
                reload();
              })
            }
          >
            {app.status === 'ACTIVE' ? 'Disable app' : 'Enable app'}
          </button>
        </form>
      ) : null}
      <ActionNote action={change} />
      <h4>Public keys</h4>
      <Loading loaded={keys}>
        {(k) => (
          <Table head={['Key id', 'Status', 'Registered', '']} empty={k.keys.length === 0}>
            {k.keys.map((key) => (
              <tr key={key.keyId} data-key={key.keyId}>
                <td class="mono">{key.keyId}</td>
                <td>
                  <Status value={key.status} />
                </td>
                <td>{time(key.createdAt)}</td>
                <td>
                  {write ? (
                    <button
                      type="button"
                      onClick={() =>
                        void change.run(async () => {
                          await patch(`/apps/${app.appId}/keys/${encodeURIComponent(key.keyId)}`, {
                            status: key.status === 'ACTIVE' ? 'DISABLED' : 'ACTIVE',
                          });
                          keys.reload();
                        })
                      }
                    >
                      {key.status === 'ACTIVE' ? 'Disable' : 'Enable'}
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Loading>
      {write ? (
        <form
          class="stack-form"
          aria-label={`Upload a key for ${app.appId}`}
          onSubmit={(e) => {
            const v = formValues(e);
            void upload.run(async () => {
              await post(`/apps/${app.appId}/keys`, { keyId: v.keyId, publicKeyPem: pem });
              setPem('');
              keys.reload();
            }, 'Key registered.');
          }}
        >
          <h4>Upload a public key</h4>
          <Field label="Key id">
            <input name="keyId" required maxLength={128} />
          </Field>
          <Field label="PEM file">
            <input
              type="file"
              accept=".pem,.pub,.txt"
              onChange={(e) => {
                const f = (e.currentTarget as HTMLInputElement).files?.[0];
                if (f) void f.text().then(setPem);
              }}
            />
          </Field>
          <Field label="Public key (PEM)" hint="-----BEGIN PUBLIC KEY----- … RSA 2048 to 4096 bits; never the private key">
            <textarea
              name="publicKeyPem"
              rows={5}
              value={pem}
              onInput={(e) => setPem((e.currentTarget as HTMLTextAreaElement).value)}
              required
            />
          </Field>
          <button type="submit" class="primary" disabled={upload.busy}>
            Upload key
          </button>
          <ActionNote action={upload} />
        </form>
      ) : null}
    </article>
  );
}

function Accounts({ merchant, reload }: { merchant: MerchantDetail; reload: () => void }) {
  const can = useCan();
  const add = useAction();
  return (
    <Section title="Settlement accounts">
      <Table
        head={['Account id', 'Entity', 'Merchant no.', 'Card', 'Agreed ceiling', 'Created']}
        empty={merchant.settlementAccounts.length === 0}
      >
        {merchant.settlementAccounts.map((a) => (
          <tr key={a.accountId}>
            <td class="mono">{a.accountId}</td>
            <td>
              {a.entityName} ({a.entityType})
            </td>
            <td class="mono">{a.merchantNo}</td>
            <td class="mono">•••• {a.cardLast4}</td>
            <td>{a.agreedCeilingFen === null ? '—' : money(a.agreedCeilingFen)}</td>
            <td>{time(a.createdAt)}</td>
          </tr>
        ))}
      </Table>
      {can('settlement.write') ? (
        <form
          class="inline-form"
          aria-label="New settlement account"
          onSubmit={(e) => {
            const v = formValues(e);
            void add.run(async () => {
              await post(`/merchants/${merchant.merchantId}/settlement-accounts`, {
                entityType: v.entityType,
                entityName: v.entityName,
                merchantNo: v.merchantNo,
                cardNumber: v.cardNumber,
                ...(v.agreedCeilingFen ? { agreedCeilingFen: Number(v.agreedCeilingFen) } : {}),
              });
              reload();
            }, 'Account added.');
          }}
        >
          <Field label="Entity type">
            <select name="entityType">
              <option>CORPORATE</option>
              <option>INDIVIDUAL</option>
            </select>
          </Field>
          <Field label="Entity name">
            <input name="entityName" required maxLength={128} />
          </Field>
          <Field label="Merchant no.">
            <input name="merchantNo" required maxLength={64} />
          </Field>
          <Field label="Card number" hint="only the last 4 digits are kept">
            <input name="cardNumber" required maxLength={19} inputMode="numeric" autocomplete="off" />
          </Field>
          <Field label="Agreed ceiling (fen, optional)">
            <input name="agreedCeilingFen" type="number" min={1} />
          </Field>
          <button type="submit" class="primary" disabled={add.busy}>
            Add account
          </button>
        </form>
      ) : null}
      <ActionNote action={add} />
    </Section>
  );
}

function AllocationSection({ merchant, reload }: { merchant: MerchantDetail; reload: () => void }) {
  const can = useCan();
  const save = useAction();
  const a = merchant.allocation;
  const [mode, setMode] = useState(a?.mode ?? 'SINGLE');
  return (
    <Section title="Allocation">
      {a ? (
        <p>
          <strong>{a.mode}</strong> over {a.participants.join(', ')}
          {a.ratios ? ` (${a.ratios.map((r) => `${r.accountId}: ${r.shareBps / 100}%`).join(', ')})` : ''} · when unavailable:{' '}
          {a.unavailablePolicy}
        </p>
      ) : (
        <p class="muted">No allocation yet.</p>
      )}
      {can('settlement.write') && merchant.settlementAccounts.length > 0 ? (
        <form
          class="stack-form"
          aria-label="Allocation"
          onSubmit={(e) => {
            const v = formValues(e);
            const participants = merchant.settlementAccounts.map((x) => x.accountId).filter((id) => v[`p_${id}`] === 'on');
            void save.run(async () => {
              await put(`/merchants/${merchant.merchantId}/allocation`, {
                mode,
                participants,
                ...(mode === 'RATIO' ? { ratios: participants.map((id) => ({ accountId: id, shareBps: Number(v[`r_${id}`]) })) } : {}),
                unavailablePolicy: v.unavailablePolicy,
              });
              reload();
            }, 'Allocation saved.');
          }}
        >
          <Field label="Mode">
            <select name="mode" value={mode} onChange={(e) => setMode((e.currentTarget as HTMLSelectElement).value)}>
              <option>SINGLE</option>
              <option>PRIORITY</option>
              <option>RATIO</option>
            </select>
          </Field>
          <fieldset>
            <legend>Participants (in order){mode === 'RATIO' ? ' and their share in basis points (sum 10000)' : ''}</legend>
            {merchant.settlementAccounts.map((x) => (
              <div class="participant" key={x.accountId}>
                <label class="check">
                  <input type="checkbox" name={`p_${x.accountId}`} defaultChecked={a?.participants.includes(x.accountId) ?? false} />{' '}
                  <span class="mono">{x.accountId}</span> {x.entityName}
                </label>
                {mode === 'RATIO' ? (
                  <input
                    name={`r_${x.accountId}`}
                    type="number"
                    min={1}
                    max={9999}
                    aria-label={`Share of ${x.accountId}`}
                    defaultValue={String(a?.ratios?.find((r) => r.accountId === x.accountId)?.shareBps ?? '')}
                  />
                ) : null}
              </div>
            ))}
          </fieldset>
          <Field label="When a participant is unavailable">
            <select name="unavailablePolicy" defaultValue={a?.unavailablePolicy ?? 'FAIL'}>
              <option>FAIL</option>
              <option>NEXT_AVAILABLE</option>
              <option>REDISTRIBUTE</option>
            </select>
          </Field>
          <button type="submit" class="primary" disabled={save.busy}>
            Save allocation
          </button>
          <ActionNote action={save} />
        </form>
      ) : null}
    </Section>
  );
}

const FEE_FIELDS: [keyof FeeRule, string][] = [
  ['ruleVersion', 'Rule version'],
  ['standardRateBps', 'Standard rate (bps)'],
  ['largeRateBps', 'Large-amount rate (bps)'],
  ['thresholdFen', 'Large-amount threshold (fen)'],
  ['merchantRateBps', 'Merchant rate (bps)'],
];

function FeeRuleSection({ merchant, reload }: { merchant: MerchantDetail; reload: () => void }) {
  const can = useCan();
  const save = useAction();
  const f = merchant.feeRule;
  return (
    <Section title="Fee rule">
      {f ? (
        <p>
          Version {f.ruleVersion}: {f.standardRateBps} bps, {f.largeRateBps} bps from {money(f.thresholdFen)}; merchant rate{' '}
          {f.merchantRateBps} bps
        </p>
      ) : (
        <p class="muted">No fee rule yet.</p>
      )}
      {can('feeRules.write') ? (
        <form
          class="inline-form"
          aria-label="Fee rule"
          onSubmit={(e) => {
            const v = formValues(e);
            void save.run(async () => {
              await put(`/merchants/${merchant.merchantId}/fee-rule`, Object.fromEntries(FEE_FIELDS.map(([k]) => [k, Number(v[k])])));
              reload();
            }, 'Fee rule saved.');
          }}
        >
          {FEE_FIELDS.map(([k, label]) => (
            <Field key={k} label={label}>
              <input name={k} type="number" min={0} required defaultValue={f ? String(f[k]) : ''} />
            </Field>
          ))}
          <button type="submit" class="primary" disabled={save.busy}>
            Save fee rule
          </button>
        </form>
      ) : null}
      <ActionNote action={save} />
    </Section>
  );
}
