/**
 * A merchant's portal users: invite, change a role, disable, send a new link. The portal's owner
 * page (`base` '') and the console's merchant page (`base` `/merchants/<id>`) show the same.
 */
import { useState } from 'preact/hooks';
import { get, patch, post } from './api.ts';
import { ActionNote, Field, Loading, Section, Status, Table, formValues, useAction, useLoad } from './components.tsx';
import { time } from './format.ts';
import { t } from './i18n.ts';
import { ROLES, roleLabel } from './roles.ts';
import type { User } from './rows.ts';

/** The link shown once to whoever invited: to give to the invited user. */
export function InvitationLink({ link }: { link: { url: string; expiresAt: string } | null }) {
  if (!link) return null;
  return (
    <div class="note ok" role="status">
      <p>{t('Give this link to the user (shown once; good until {until}):', { until: time(link.expiresAt) })}</p>
      <input class="mono invitation-link" readOnly value={link.url} onFocus={(e) => (e.currentTarget as HTMLInputElement).select()} />
    </div>
  );
}

export function MerchantUsers({ base }: { base: string }) {
  const loaded = useLoad(() => get<{ users: User[] }>(`${base}/users`), [base]);
  const invite = useAction();
  const change = useAction();
  const [link, setLink] = useState<{ url: string; expiresAt: string } | null>(null);
  const issued = (r: { invitationUrl: string; invitationExpiresAt: string }) =>
    setLink({ url: r.invitationUrl, expiresAt: r.invitationExpiresAt });
  return (
    <>
      <Section title={t('Invite a user')}>
        <form
          class="inline-form"
          aria-label={t('Invite a user')}
          onSubmit={(e) => {
            const form = e.currentTarget as HTMLFormElement;
            const v = formValues(e);
            void invite.run(async () => {
              issued(await post<{ invitationUrl: string; invitationExpiresAt: string }>(`${base}/users`, { login: v.login, role: v.role }));
              // Invited: the form is empty for the next one (the link stays below).
              form.reset();
              loaded.reload();
            });
          }}
        >
          <Field label={t('Login (e-mail address or name)')}>
            <input name="login" required maxLength={128} />
          </Field>
          <Field label={t('Role')}>
            <select name="role">
              {ROLES.map((r) => (
                <option key={r} value={r}>
                  {roleLabel(r)}
                </option>
              ))}
            </select>
          </Field>
          <button type="submit" class="primary" disabled={invite.busy}>
            {t('Invite')}
          </button>
        </form>
        <ActionNote action={invite} />
        <InvitationLink link={link} />
      </Section>
      <Section title={t('Users of the merchant')}>
        <ActionNote action={change} />
        <Loading loaded={loaded}>
          {(d) => (
            <Table head={[t('Login'), t('Role'), t('Status'), t('Second factor'), t('Created'), '']} empty={d.users.length === 0}>
              {d.users.map((u) => (
                <tr key={u.userId} data-user={u.login}>
                  <td class="mono">{u.login}</td>
                  <td>
                    <select
                      aria-label={t('Role of {login}', { login: u.login })}
                      value={u.role}
                      onChange={(e) =>
                        void change.run(async () => {
                          await patch(`${base}/users/${u.userId}`, { role: (e.currentTarget as HTMLSelectElement).value });
                          loaded.reload();
                        }, t('Role changed.'))
                      }
                    >
                      {ROLES.map((r) => (
                        <option key={r} value={r}>
                          {roleLabel(r)}
                        </option>
                      ))}
                    </select>
                  </td>
                  <td>
                    <Status value={u.status} />
                  </td>
                  <td>{u.totpEnabled ? t('on') : t('off')}</td>
                  <td class="when">{time(u.createdAt)}</td>
                  <td>
                    <button
                      type="button"
                      onClick={() =>
                        void change.run(async () => {
                          await patch(`${base}/users/${u.userId}`, { status: u.status === 'DISABLED' ? 'ACTIVE' : 'DISABLED' });
                          loaded.reload();
                        })
                      }
                    >
                      {u.status === 'DISABLED' ? t('Enable') : t('Disable')}
                    </button>{' '}
                    {u.status !== 'DISABLED' ? (
                      <button
                        type="button"
                        onClick={() =>
                          void change.run(async () => {
                            issued(
                              await post<{ invitationUrl: string; invitationExpiresAt: string }>(`${base}/users/${u.userId}/invitation`),
                            );
                            loaded.reload();
                          })
                        }
                      >
                        {u.status === 'INVITED' ? t('New invitation link') : t('Password reset link')}
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </Table>
          )}
        </Loading>
      </Section>
    </>
  );
}
