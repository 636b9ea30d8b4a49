/** Merchants: the list and creation; one merchant's apps, keys, settlement accounts, allocation and fee rule. */
import { t } from '../../../ui/i18n.ts';
import { useState } from 'preact/hooks';
import { get, patch, post, put } from '../../../ui/api.ts';
import type { App, FeeRule, MerchantDetail } from '../../../ui/rows.ts';
import { ActionNote, Field, Loading, Section, Status, Table, formValues, useAction, useCan, useLoad } from '../../../ui/components.tsx';
import { money, time } from '../../../ui/format.ts';
import { DEFAULT_FEE_RULE } from '../../../domain/money.ts';
import { MerchantUsers } from '../../../ui/merchant-users.tsx';
import { AccountsTable, PublicKeyForm } from '../../../ui/merchant-views.tsx';

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
      <h1>{t('Merchants')}</h1>
      {can('merchants.write') ? (
        <Section title={t('New merchant')}>
          <form
            class="inline-form"
            aria-label={t('New merchant')}
            onSubmit={(e) => {
              const v = formValues(e);
              void create.run(async () => {
                const m = await post<{ merchantId: string }>('/merchants', { name: v.name, entityType: v.entityType });
                window.location.hash = `#/merchants/${m.merchantId}`;
              });
            }}
          >
            <Field label={t('Name')}>
              <input name="name" required maxLength={128} />
            </Field>
            <Field label={t('Entity type')}>
              <select name="entityType">
                <option value="CORPORATE">CORPORATE</option>
                <option value="INDIVIDUAL">INDIVIDUAL</option>
              </select>
            </Field>
            <button type="submit" class="primary" disabled={create.busy}>
              {t('Create merchant')}
            </button>
          </form>
          <ActionNote action={create} />
        </Section>
      ) : null}
      <Section title={t('All merchants')}>
        <Loading loaded={loaded}>
          {(d) => (
            <Table head={[t('Name'), t('Merchant id'), t('Entity type'), t('Created')]} empty={d.merchants.length === 0}>
              {d.merchants.map((m) => (
                <tr key={m.merchantId}>
                  <td>
                    <a href={`#/merchants/${m.merchantId}`}>{m.name}</a>
                  </td>
                  <td class="mono">{m.merchantId}</td>
                  <td>{m.entityType}</td>
                  <td class="when">{time(m.createdAt)}</td>
                </tr>
              ))}
            </Table>
          )}
        </Loading>
      </Section>
    </>
  );
}

export function MerchantPage({ merchantId }: { merchantId: string }) {
  const can = useCan();
  const loaded = useLoad(() => get<MerchantDetail>(`/merchants/${encodeURIComponent(merchantId)}`), [merchantId]);
  return (
    <>
      <p>
        <a href="#/merchants">{t('← Merchants')}</a>
      </p>
      <Loading loaded={loaded}>
        {(m) => (
          <>
            <h1>{m.name}</h1>
            <p class="muted">
              <span class="mono">{m.merchantId}</span> · {m.entityType} · {t('created {at}', { at: time(m.createdAt) })}
            </p>
            <Apps merchantId={m.merchantId} apps={m.apps} reload={loaded.reload} />
            <Accounts merchant={m} reload={loaded.reload} />
            <AllocationSection merchant={m} reload={loaded.reload} />
            <FeeRuleSection merchant={m} reload={loaded.reload} />
            {can('merchants.write') ? (
              <>
                <h2 class="page-section">{t('Merchant portal users')}</h2>
                <MerchantUsers base={`/merchants/${encodeURIComponent(m.merchantId)}`} />
              </>
            ) : null}
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
    <Section title={t('Apps')}>
      {apps.length === 0 ? <p class="muted">{t('No app yet.')}</p> : null}
      {apps.map((a) => (
        <AppCard key={a.appId} app={a} reload={reload} />
      ))}
      {can('merchants.write') ? (
        <form
          class="inline-form"
          aria-label={t('New app')}
          onSubmit={(e) => {
            const v = formValues(e);
            const channels = ['ALIPAY_H5', 'WECHAT_H5'].filter((c) => v[`channel_${c}`] === 'on');
            void create.run(async () => {
              await post(`/merchants/${merchantId}/apps`, { ...(v.notifyUrl ? { notifyUrl: v.notifyUrl } : {}), channels });
              reload();
            }, t('App created.'));
          }}
        >
          <h3>{t('New app')}</h3>
          <Field label={t('Notify URL (optional)')} hint={t('https://… where the merchant receives signed events')}>
            <input name="notifyUrl" type="url" maxLength={512} />
          </Field>
          <fieldset>
            <legend>{t('Channels')}</legend>
            <label class="check">
              <input type="checkbox" name="channel_ALIPAY_H5" defaultChecked /> ALIPAY_H5
            </label>
            <label class="check">
              <input type="checkbox" name="channel_WECHAT_H5" defaultChecked /> WECHAT_H5
            </label>
          </fieldset>
          <button type="submit" class="primary" disabled={create.busy}>
            {t('Create app')}
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
  const write = can('merchants.write');
  return (
    <article class="app" data-app={app.appId}>
      <h3>
        <span class="mono">{app.appId}</span> <Status value={app.status} />
      </h3>
      <dl class="facts">
        <dt>{t('Notify URL')}</dt>
        <dd class="mono">{app.notifyUrl ?? '—'}</dd>
        <dt>{t('Channels')}</dt>
        <dd>{app.channels.join(', ')}</dd>
        <dt>{t('Trade scopes')}</dt>
        <dd>{app.tradeScopes.join(', ')}</dd>
        <dt>{t('IP allowlist')}</dt>
        <dd class="mono">{app.ipAllowlist.length ? app.ipAllowlist.join(', ') : t('any')}</dd>
        <dt>{t('Payment window')}</dt>
        <dd>{app.paymentWindowSeconds} s</dd>
        <dt>{t('Daily ceiling')}</dt>
        <dd>{app.dailyAmountCeilingFen === null ? t('none') : money(app.dailyAmountCeilingFen)}</dd>
        <dt>{t('Rate limit')}</dt>
        <dd>{app.rateLimitPerSecond} / s</dd>
        <dt>{t('Statement downloads at once')}</dt>
        <dd>{app.statementDownloadsAtOnce ?? t('default')}</dd>
      </dl>
      {write ? (
        <form
          class="inline-form"
          aria-label={t('Change app {app}', { app: app.appId })}
          onSubmit={(e) => {
            const v = formValues(e);
            void change.run(async () => {
              await patch(`/apps/${app.appId}`, {
                notifyUrl: v.notifyUrl ? v.notifyUrl : null,
                rateLimitPerSecond: Number(v.rateLimitPerSecond),
                statementDownloadsAtOnce: v.statementDownloadsAtOnce ? Number(v.statementDownloadsAtOnce) : null,
                ipAllowlist: v.ipAllowlist ? v.ipAllowlist.split(/[\s,]+/).filter(Boolean) : [],
              });
              reload();
            }, t('App changed.'));
          }}
        >
          <Field label={t('Notify URL')}>
            <input name="notifyUrl" type="url" defaultValue={app.notifyUrl ?? ''} />
          </Field>
          <Field label={t('Rate limit per second')}>
            <input name="rateLimitPerSecond" type="number" min={1} max={100000} defaultValue={String(app.rateLimitPerSecond)} />
          </Field>
          <Field label={t('Statement downloads at once (empty = default)')}>
            <input
              name="statementDownloadsAtOnce"
              type="number"
              min={1}
              max={1000}
              defaultValue={app.statementDownloadsAtOnce === null ? '' : String(app.statementDownloadsAtOnce)}
            />
          </Field>
          <Field label={t('IP allowlist (CIDRs, empty = any)')}>
            <input name="ipAllowlist" defaultValue={app.ipAllowlist.join(' ')} />
          </Field>
          <button type="submit" disabled={change.busy}>
            {t('Save app')}
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
            {app.status === 'ACTIVE' ? t('Disable app') : t('Enable app')}
          </button>
        </form>
      ) : null}
      <ActionNote action={change} />
      <h4>{t('Public keys')}</h4>
      <Loading loaded={keys}>
        {(k) => (
          <Table head={[t('Key id'), t('Status'), t('Registered'), '']} empty={k.keys.length === 0}>
            {k.keys.map((key) => (
              <tr key={key.keyId} data-key={key.keyId}>
                <td class="mono">{key.keyId}</td>
                <td>
                  <Status value={key.status} />
                </td>
                <td class="when">{time(key.createdAt)}</td>
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
                      {key.status === 'ACTIVE' ? t('Disable') : t('Enable')}
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Loading>
      {write ? (
        <PublicKeyForm
          path={`/apps/${app.appId}/keys`}
          label={t('Upload a key for {app}', { app: app.appId })}
          title={t('Upload a public key')}
          submit={t('Upload key')}
          done={t('Key registered.')}
          onAdded={keys.reload}
        />
      ) : null}
    </article>
  );
}

function Accounts({ merchant, reload }: { merchant: MerchantDetail; reload: () => void }) {
  const can = useCan();
  const add = useAction();
  return (
    <Section title={t('Settlement accounts')}>
      <AccountsTable accounts={merchant.settlementAccounts} />
      {can('settlement.write') ? (
        <form
          class="inline-form"
          aria-label={t('New settlement account')}
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
            }, t('Account added.'));
          }}
        >
          <Field label={t('Entity type')}>
            <select name="entityType">
              <option>CORPORATE</option>
              <option>INDIVIDUAL</option>
            </select>
          </Field>
          <Field label={t('Entity name')}>
            <input name="entityName" required maxLength={128} />
          </Field>
          <Field label={t('Merchant no.')}>
            <input name="merchantNo" required maxLength={64} />
          </Field>
          <Field label={t('Card number')} hint={t('only the last 4 digits are kept')}>
            <input name="cardNumber" required maxLength={19} inputMode="numeric" autocomplete="off" />
          </Field>
          <Field label={t('Agreed ceiling (fen, optional)')}>
            <input name="agreedCeilingFen" type="number" min={1} />
          </Field>
          <button type="submit" class="primary" disabled={add.busy}>
            {t('Add account')}
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
  const [mode, setMode] = useState<string>(a?.mode ?? 'SINGLE');
  return (
    <Section title={t('Allocation')}>
      {a ? (
        <p>
          <strong>{a.mode}</strong> {t('over')} {a.participants.join(', ')}
          {a.ratios ? ` (${a.ratios.map((r) => `${r.accountId}: ${r.shareBps / 100}%`).join(', ')})` : ''} · {t('when unavailable:')}{' '}
          {a.unavailablePolicy}
        </p>
      ) : (
        <p class="muted">{t('No allocation yet.')}</p>
      )}
      {can('settlement.write') && merchant.settlementAccounts.length > 0 ? (
        <form
          class="stack-form"
          aria-label={t('Allocation')}
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
            }, t('Allocation saved.'));
          }}
        >
          <Field label={t('Mode')}>
            <select name="mode" value={mode} onChange={(e) => setMode((e.currentTarget as HTMLSelectElement).value)}>
              <option>SINGLE</option>
              <option>PRIORITY</option>
              <option>RATIO</option>
            </select>
          </Field>
          <fieldset>
            <legend>
              {mode === 'RATIO' ? t('Participants (in order) and their share in basis points (sum 10000)') : t('Participants (in order)')}
            </legend>
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
                    aria-label={t('Share of {account}', { account: x.accountId })}
                    defaultValue={String(a?.ratios?.find((r) => r.accountId === x.accountId)?.shareBps ?? '')}
                  />
                ) : null}
              </div>
            ))}
          </fieldset>
          <Field label={t('When a participant is unavailable')}>
            <select name="unavailablePolicy" defaultValue={a?.unavailablePolicy ?? 'FAIL'}>
              <option>FAIL</option>
              <option>NEXT_AVAILABLE</option>
              <option>REDISTRIBUTE</option>
            </select>
          </Field>
          <button type="submit" class="primary" disabled={save.busy}>
            {t('Save allocation')}
          </button>
          <ActionNote action={save} />
        </form>
      ) : null}
    </Section>
  );
}

const FEE_FIELDS: [keyof FeeRule, () => string][] = [
  ['ruleVersion', () => t('Rule version')],
  ['standardRateBps', () => t('Standard rate (bps)')],
  ['largeRateBps', () => t('Large-amount rate (bps)')],
  ['thresholdFen', () => t('Large-amount threshold (fen)')],
  ['merchantRateBps', () => t('Merchant rate (bps)')],
];

function FeeRuleSection({ merchant, reload }: { merchant: MerchantDetail; reload: () => void }) {
  const can = useCan();
  const save = useAction();
  const f = merchant.feeRule;
  return (
    <Section title={t('Fee rule')}>
      {f ? (
        <p>
          Version {f.ruleVersion}: {f.standardRateBps} bps, {f.largeRateBps} bps from {money(f.thresholdFen)}; merchant rate{' '}
          {f.merchantRateBps} bps
        </p>
      ) : (
        <p class="muted">
          {t(
            'No rule of its own: the platform default applies: {standard} bps, {large} bps from {threshold}; merchant rate {merchant} bps',
            {
              standard: String(DEFAULT_FEE_RULE.standardRateBps),
              large: String(DEFAULT_FEE_RULE.largeRateBps),
              threshold: money(DEFAULT_FEE_RULE.thresholdFen),
              merchant: String(DEFAULT_FEE_RULE.merchantRateBps),
            },
          )}
        </p>
      )}
      {can('feeRules.write') ? (
        <form
          class="inline-form"
          aria-label={t('Fee rule')}
          onSubmit={(e) => {
            const v = formValues(e);
            void save.run(async () => {
              await put(`/merchants/${merchant.merchantId}/fee-rule`, Object.fromEntries(FEE_FIELDS.map(([k]) => [k, Number(v[k])])));
              reload();
            }, t('Fee rule saved.'));
          }}
        >
          {FEE_FIELDS.map(([k, label]) => (
            <Field key={k} label={label()}>
              <input name={k} type="number" min={0} required defaultValue={f ? String(f[k]) : ''} />
            </Field>
          ))}
          <button type="submit" class="primary" disabled={save.busy}>
            {t('Save fee rule')}
          </button>
        </form>
      ) : null}
      <ActionNote action={save} />
    </Section>
  );
}
