/** The signed-in operator's own account: API tokens and password. */
import { useContext, useState } from 'preact/hooks';
import type { Session } from '../session.ts';
import { del, get, post } from '../../../ui/api.ts';
import { ActionNote, Field, Loading, SessionContext, Table, formValues, useAction, useLoad, Section } from '../../../ui/components.tsx';
import { time } from '../../../ui/format.ts';

interface Token {
  tokenId: string;
  label: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

/** An operator's API tokens: create (the token is shown once), revoke. */
export function Tokens({ operatorId }: { operatorId: string }) {
  const loaded = useLoad(() => get<{ tokens: Token[] }>(`/operators/${operatorId}/tokens`), [operatorId]);
  const action = useAction();
  const [shown, setShown] = useState<string | null>(null);
  return (
    <>
      <Loading loaded={loaded}>
        {(d) => (
          <Table head={['Label', 'Starts with', 'Created', 'Last used', '']} empty={d.tokens.length === 0}>
            {d.tokens.map((t) => (
              <tr key={t.tokenId}>
                <td>{t.label}</td>
                <td class="mono">{t.prefix}…</td>
                <td>{time(t.createdAt)}</td>
                <td>{time(t.lastUsedAt)}</td>
                <td>
                  {t.revokedAt ? (
                    `revoked ${time(t.revokedAt)}`
                  ) : (
                    <button
                      type="button"
                      class="danger"
                      onClick={() =>
                        void action.run(async () => {
                          await del(`/operators/${operatorId}/tokens/${t.tokenId}`);
                          loaded.reload();
                        }, 'Token revoked.')
                      }
                    >
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Loading>
      <form
        class="inline-form"
        aria-label="New API token"
        onSubmit={(e) => {
          const v = formValues(e);
          void action.run(async () => {
            const r = await post<{ token: string }>(`/operators/${operatorId}/tokens`, { label: v.label });
            setShown(r.token);
            loaded.reload();
          });
        }}
      >
        <Field label="Label">
          <input name="label" required maxLength={128} placeholder="reporting script" />
        </Field>
        <button type="submit" disabled={action.busy}>
          Create token
        </button>
      </form>
      {shown ? (
        <p class="note ok" role="status">
          The new token, shown only now (use it as <code>Authorization: Bearer …</code>): <code class="token">{shown}</code>
        </p>
      ) : null}
      <ActionNote action={action} />
    </>
  );
}

export function AccountPage() {
  const session = useContext(SessionContext) as Session;
  const change = useAction();
  return (
    <>
      <h1>My account</h1>
      <p>
        Signed in as <strong>{session.operator.name}</strong> ({session.operator.role}) until {time(session.expiresAt)} at the latest.
      </p>
      <Section title="My API tokens (for the admin API, with my role)">
        <Tokens operatorId={session.operator.operatorId} />
      </Section>
      <Section title="Change my password">
        <form
          class="stack-form"
          aria-label="Change my password"
          onSubmit={(e) => {
            const v = formValues(e);
            const form = e.currentTarget as HTMLFormElement;
            void change.run(async () => {
              await post('/console/api/password', { currentPassword: v.currentPassword, newPassword: v.newPassword });
              form.reset();
            }, 'Password changed; your other sessions have ended.');
          }}
        >
          <Field label="Current password">
            <input name="currentPassword" type="password" autocomplete="current-password" required />
          </Field>
          <Field label="New password" hint="at least 12 characters">
            <input name="newPassword" type="password" autocomplete="new-password" required minLength={12} />
          </Field>
          <button type="submit" class="primary" disabled={change.busy}>
            Change password
          </button>
          <ActionNote action={change} />
        </form>
      </Section>
    </>
  );
}
