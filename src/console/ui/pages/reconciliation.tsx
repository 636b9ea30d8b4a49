/**
 * Reconciliation (docs/reconciliation.md): ask for a day's runs, the runs and their counts, one run
 * with its lines by outcome, and the provider discrepancies (every finding of a run is one, source
 * STATEMENT, next to what notices and queries reported), resolved here once dealt with.
 */
import { t } from '../../../ui/i18n.ts';
import { useEffect, useState } from 'preact/hooks';
import { get, post, query } from '../../../ui/api.ts';
import { ActionNote, Field, Loading, Section, Status, Table, formValues, useAction, useCan, useLoad } from '../../../ui/components.tsx';
import { money, time } from '../../../ui/format.ts';

interface Run {
  runId: string;
  provider: string;
  day: string;
  trigger: string;
  status: string;
  tries: number;
  providerLines: number | null;
  ledgerLines: number | null;
  matched: number | null;
  converged: number | null;
  discrepancies: number | null;
  error: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  nextTryAt: string | null;
}

interface Line {
  lineNo: number;
  origin: string;
  kind: string;
  subjectId: string;
  providerRef: string | null;
  amountFen: number | null;
  state: string;
  occurredAt: string | null;
  outcome: string | null;
  discrepancyId: string | null;
}

interface Discrepancy {
  id: string;
  provider: string;
  source: string;
  kind: string;
  subjectId: string;
  expected: unknown;
  reported: unknown;
  status: string;
  createdAt: string;
  resolvedAt: string | null;
}

const PROVIDERS = ['sandbox', 'alipay', 'wechatpay'];
const SOURCES = ['STATEMENT', 'NOTICE', 'QUERY', 'ANSWER'];

/** Yesterday in Asia/Shanghai, the day a daily run reconciles. */
function yesterday(): string {
  return new Date(Date.now() + 8 * 3_600_000 - 86_400_000).toISOString().slice(0, 10);
}

const count = (n: number | null) => (n === null ? '—' : String(n));

/** A filter's select: `any` (the empty value) first, then the options, `value` selected. */
function Pick({
  label,
  name,
  options,
  value = '',
  any = t('any'),
}: {
  label: string;
  name: string;
  options: readonly string[];
  value?: string;
  any?: string;
}) {
  return (
    <Field label={label}>
      <select name={name}>
        <option value="">{any}</option>
        {options.map((o) => (
          <option key={o} selected={o === value}>
            {o}
          </option>
        ))}
      </select>
    </Field>
  );
}

function RequestRun({ onDone }: { onDone: () => void }) {
  const action = useAction();
  return (
    <Section title={t('Reconcile a day')}>
      <form
        class="inline-form"
        aria-label={t('Reconcile a day')}
        onSubmit={(e) => {
          const v = formValues(e);
          void action.run(async () => {
            await post('/reconciliation/runs', { day: v.day, ...(v.provider ? { provider: v.provider } : {}) });
            onDone();
          }, t('Queued: the workers run it within seconds.'));
        }}
      >
        <Field label={t('Day (Asia/Shanghai)')}>
          <input name="day" type="date" required defaultValue={yesterday()} />
        </Field>
        <Pick label={t('Provider')} name="provider" options={PROVIDERS} any="every provider with statements" />
        <button type="submit" class="primary" disabled={action.busy}>
          {t('Reconcile')}
        </button>
      </form>
      <ActionNote action={action} />
    </Section>
  );
}

function Discrepancies() {
  const can = useCan();
  const [filter, setFilter] = useState({ status: 'OPEN', source: '' });
  const loaded = useLoad(
    () => get<{ discrepancies: Discrepancy[] }>(`/provider-discrepancies${query({ ...filter, limit: 200 })}`),
    [filter.status, filter.source],
  );
  const action = useAction();
  return (
    <Section title={t('Provider discrepancies')}>
      <form
        class="inline-form"
        aria-label={t('Filter discrepancies')}
        onSubmit={(e) => {
          const v = formValues(e);
          setFilter({ status: v.status ?? '', source: v.source ?? '' });
        }}
      >
        <Pick label={t('Status')} name="status" options={['OPEN', 'RESOLVED']} value={filter.status} />
        <Pick label={t('Source')} name="source" options={SOURCES} value={filter.source} />
        <button type="submit" class="primary">
          {t('Show')}
        </button>
      </form>
      <ActionNote action={action} />
      <Loading loaded={loaded}>
        {(d) => (
          <Table
            head={[
              t('Id'),
              t('Provider'),
              t('Source'),
              t('Kind'),
              t('Subject'),
              t('Ledger'),
              t('Provider said'),
              t('Status'),
              t('Found'),
              '',
            ]}
            empty={d.discrepancies.length === 0}
          >
            {d.discrepancies.map((x) => (
              <tr key={x.id}>
                <td class="mono wrap">{x.id}</td>
                <td>{x.provider}</td>
                <td>{x.source}</td>
                <td>{x.kind}</td>
                <td class="mono wrap">{x.subjectId}</td>
                <td class="json-cell">{x.expected === null ? '—' : JSON.stringify(x.expected)}</td>
                <td class="json-cell">{JSON.stringify(x.reported)}</td>
                <td>
                  <Status value={x.status} />
                </td>
                <td class="when">{time(x.createdAt)}</td>
                <td>
                  {x.status === 'OPEN' && can('reconciliation.write') ? (
                    <button
                      type="button"
                      disabled={action.busy}
                      onClick={() =>
                        void action.run(
                          async () => {
                            await post(`/provider-discrepancies/${encodeURIComponent(x.id)}/resolve`);
                            loaded.reload();
                          },
                          t('Discrepancy {id} resolved.', { id: x.id }),
                        )
                      }
                    >
                      {t('Resolve')}
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Loading>
    </Section>
  );
}

export function ReconciliationPage() {
  const can = useCan();
  const [filter, setFilter] = useState({ day: '', provider: '' });
  const loaded = useLoad(
    () => get<{ runs: Run[] }>(`/reconciliation/runs${query({ ...filter, limit: 100 })}`),
    [filter.day, filter.provider],
  );
  return (
    <>
      <h1>{t('Reconciliation')}</h1>
      {can('reconciliation.write') ? <RequestRun onDone={loaded.reload} /> : null}
      <Section title={t('Runs, newest first')}>
        <form
          class="inline-form"
          aria-label={t('Filter runs')}
          onSubmit={(e) => {
            const v = formValues(e);
            setFilter({ day: v.day ?? '', provider: v.provider ?? '' });
          }}
        >
          <Field label={t('Day')}>
            <input name="day" type="date" defaultValue={filter.day} />
          </Field>
          <Pick label={t('Provider')} name="provider" options={PROVIDERS} value={filter.provider} />
          <button type="submit" class="primary">
            {t('Show')}
          </button>
        </form>
        <Loading loaded={loaded}>
          {(d) => (
            <Table
              head={[
                t('Run'),
                t('Provider'),
                t('Day'),
                t('Trigger'),
                t('Status'),
                t('Statement lines'),
                t('Ledger only'),
                t('Matched'),
                t('Converged'),
                t('Discrepancies'),
                t('Finished'),
              ]}
              empty={d.runs.length === 0}
            >
              {d.runs.map((r) => (
                <tr key={r.runId}>
                  <td class="mono wrap">
                    <a href={`#/reconciliation/${r.runId}`}>{r.runId}</a>
                  </td>
                  <td>{r.provider}</td>
                  <td>{r.day}</td>
                  <td>{r.trigger}</td>
                  <td>
                    <Status value={r.status} />
                  </td>
                  <td class="num">{count(r.providerLines)}</td>
                  <td class="num">{count(r.ledgerLines)}</td>
                  <td class="num">{count(r.matched)}</td>
                  <td class="num">{count(r.converged)}</td>
                  <td class="num">{count(r.discrepancies)}</td>
                  <td class="when">{time(r.finishedAt)}</td>
                </tr>
              ))}
            </Table>
          )}
        </Loading>
      </Section>
      <Discrepancies />
    </>
  );
}

export function ReconciliationRunPage({ runId }: { runId: string }) {
  const run = useLoad(() => get<Run & { outcomes: Record<string, number> }>(`/reconciliation/runs/${encodeURIComponent(runId)}`), [runId]);
  const [outcome, setOutcome] = useState('');
  const [pages, setPages] = useState<Line[][]>([]);
  const [next, setNext] = useState<number | null>(null);
  const lines = useAction();
  const load = (o: string, after: number | null) =>
    lines.run(async () => {
      const r = await get<{ lines: Line[]; nextAfter: number | null }>(
        `/reconciliation/runs/${encodeURIComponent(runId)}/lines${query({ outcome: o, after, limit: 200 })}`,
      );
      setPages((p) => (after === null ? [r.lines] : [...p, r.lines]));
      setNext(r.nextAfter);
    });
  useEffect(() => {
    void load(outcome, null);
  }, [runId, outcome]);
  return (
    <>
      <p>
        <a href="#/reconciliation">{t('← Reconciliation')}</a>
      </p>
      <h1>
        Run <span class="mono">{runId}</span>
      </h1>
      <Loading loaded={run}>
        {(r) => (
          <Section title={`${r.provider}, ${r.day}`}>
            <dl class="facts">
              <dt>{t('Status')}</dt>
              <dd>
                <Status value={r.status} /> {r.error ?? ''}
              </dd>
              <dt>{t('Trigger')}</dt>
              <dd>
                {r.trigger} (try {r.tries})
              </dd>
              <dt>{t('Started')}</dt>
              <dd>{time(r.startedAt)}</dd>
              <dt>{t('Finished')}</dt>
              <dd>{time(r.finishedAt)}</dd>
              <dt>{t('Next try')}</dt>
              <dd>{time(r.nextTryAt)}</dd>
              {Object.entries(r.outcomes).map(([k, n]) => [<dt key={`${k}-t`}>{k}</dt>, <dd key={`${k}-n`}>{n}</dd>])}
            </dl>
          </Section>
        )}
      </Loading>
      <Section title={t('Lines')}>
        <form class="inline-form" aria-label={t('Filter lines')} onSubmit={(e) => setOutcome(formValues(e).outcome ?? '')}>
          <Pick label={t('Outcome')} name="outcome" options={Object.keys(run.data?.outcomes ?? {})} value={outcome} />
          <button type="submit" class="primary">
            {t('Show')}
          </button>
        </form>
        <ActionNote action={lines} />
        <Table
          head={[
            '#',
            t('From'),
            t('Kind'),
            t('Subject'),
            t('Provider ref.'),
            t('Amount'),
            t('State'),
            t('At'),
            t('Outcome'),
            t('Discrepancy'),
          ]}
          empty={pages.flat().length === 0}
        >
          {pages.flat().map((l) => (
            <tr key={l.lineNo}>
              <td class="num">{l.lineNo}</td>
              <td>{l.origin === 'PROVIDER' ? 'statement' : 'ledger'}</td>
              <td>{l.kind}</td>
              <td class="mono">{l.subjectId}</td>
              <td class="mono">{l.providerRef ?? '—'}</td>
              <td class="num">{money(l.amountFen)}</td>
              <td>{l.state}</td>
              <td class="when">{time(l.occurredAt)}</td>
              <td>{l.outcome ?? '—'}</td>
              <td class="mono">{l.discrepancyId ?? ''}</td>
            </tr>
          ))}
        </Table>
        {next !== null ? (
          <button type="button" disabled={lines.busy} onClick={() => void load(outcome, next)}>
            {t('More lines')}
          </button>
        ) : null}
      </Section>
    </>
  );
}
