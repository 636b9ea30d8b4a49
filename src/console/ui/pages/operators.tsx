/** Operators (the admin role's): create, change role, disable, reset a password, end sessions, tokens; the role table. */
import { t } from '../../../ui/i18n.ts';
import { useState } from 'preact/hooks';
import { get, patch, post } from '../../../ui/api.ts';
import { ActionNote, Confirm, Field, Loading, Section, Status, Table, formValues, useAction, useLoad } from '../../../ui/components.tsx';
import { time } from '../../../ui/format.ts';
import { Tokens } from './account.tsx';

interface Operator {
  operatorId: string;
  name: string;
  role: string;
  status: string;
  passwordChangedAt: string;
  createdAt: string;
}

const ROLES = ['admin', 'operations', 'finance', 'support'];

export function OperatorsPage() {
  const loaded = useLoad(() => get<{ operators: Operator[] }>('/operators'), []);
  const roles = useLoad(() => get<{ roles: { role: string; permissions: string[] }[] }>('/roles'), []);
  const create = useAction();
  const [open, setOpen] = useState<string | null>(null);
  return (
    <>
      <h1>{t('Operators')}</h1>
      <Section title={t('New operator')}>
        <form
          class="inline-form"
          aria-label={t('New operator')}
          onSubmit={(e) => {
            const v = formValues(e);
            const form = e.currentTarget as HTMLFormElement;
            void create.run(async () => {
              await post('/operators', { name: v.name, role: v.role, password: v.password });
              form.reset();
              loaded.reload();
            }, t('Operator created.'));
          }}
        >
          <Field label={t('Name')} hint={t('lower-case letters, digits, . _ -')}>
            <input name="name" required maxLength={64} autocomplete="off" />
          </Field>
          <Field label={t('Role')}>
            <select name="role">
              {ROLES.map((r) => (
                <option key={r}>{r}</option>
              ))}
            </select>
          </Field>
          <Field label={t('Password')} hint={t('at least 12 characters')}>
            <input name="password" type="password" required minLength={12} autocomplete="new-password" />
          </Field>
          <button type="submit" class="primary" disabled={create.busy}>
            {t('Create operator')}
          </button>
        </form>
        <ActionNote action={create} />
      </Section>
      <Section title={t('Operators')}>
        <Loading loaded={loaded}>
          {(d) => (
            <Table head={[t('Name'), t('Role'), t('Status'), t('Password changed'), t('Created'), '']}>
              {d.operators.map((o) => (
                <tr key={o.operatorId} data-operator={o.name}>
                  <td>{o.name}</td>
                  <td>{o.role}</td>
                  <td>
                    <Status value={o.status} />
                  </td>
                  <td class="when">{time(o.passwordChangedAt)}</td>
                  <td class="when">{time(o.createdAt)}</td>
                  <td>
                    <button type="button" onClick={() => setOpen(open === o.operatorId ? null : o.operatorId)}>
                      {open === o.operatorId ? t('Close') : t('Manage')}
                    </button>
                  </td>
                </tr>
              ))}
            </Table>
          )}
        </Loading>
      </Section>
      {open && loaded.data ? (
        <ManageOperator key={open} operator={loaded.data.operators.find((o) => o.operatorId === open)!} reload={loaded.reload} />
      ) : null}
      <Section title={t('Roles and what they allow')}>
        <Loading loaded={roles}>
          {(r) => (
            <Table head={[t('Role'), t('Permissions')]}>
              {r.roles.map((x) => (
                <tr key={x.role}>
                  <td>{x.role}</td>
                  <td class="mono small">{x.permissions.join(', ')}</td>
                </tr>
              ))}
            </Table>
          )}
        </Loading>
      </Section>
    </>
  );
}

function ManageOperator({ operator: o, reload }: { operator: Operator; reload: () => void }) {
  const action = useAction();
  return (
    <Section title={t('Manage {name}', { name: o.name })}>
      <form
        class="inline-form"
        aria-label={t('Role of {name}', { name: o.name })}
        onSubmit={(e) => {
          const v = formValues(e);
          void action.run(async () => {
            await patch(`/operators/${o.operatorId}`, { role: v.role });
            reload();
          }, t('Role changed.'));
        }}
      >
        <Field label={t('Role')}>
          <select name="role" defaultValue={o.role}>
            {ROLES.map((r) => (
              <option key={r}>{r}</option>
            ))}
          </select>
        </Field>
        <button type="submit">{t('Change role')}</button>
        <Confirm
          label={o.status === 'ACTIVE' ? t('Disable') : t('Enable')}
          danger={o.status === 'ACTIVE'}
          question={
            o.status === 'ACTIVE'
              ? t('Disable {name}? Their sessions and tokens stop working.', { name: o.name })
              : t('Enable {name}?', { name: o.name })
          }
          onConfirm={() =>
            void action.run(async () => {
              await patch(`/operators/${o.operatorId}`, { status: o.status === 'ACTIVE' ? 'DISABLED' : 'ACTIVE' });
              reload();
            })
          }
        />
        <Confirm
          label={t('End sessions')}
          question={`Sign ${o.name} out everywhere?`}
          onConfirm={() => void action.run(() => post(`/operators/${o.operatorId}/sessions/revoke`), t('Sessions ended.'))}
        />
      </form>
      <form
        class="inline-form"
        aria-label={t('Reset the password of {name}', { name: o.name })}
        onSubmit={(e) => {
          const v = formValues(e);
          const form = e.currentTarget as HTMLFormElement;
          void action.run(async () => {
            await patch(`/operators/${o.operatorId}`, { password: v.password });
            form.reset();
            reload();
          }, t('Password reset; their sessions have ended.'));
        }}
      >
        <Field label={t('New password')}>
          <input name="password" type="password" required minLength={12} autocomplete="new-password" />
        </Field>
        <button type="submit">{t('Reset password')}</button>
      </form>
      <ActionNote action={action} />
      <h3>{t('API tokens')}</h3>
      <Tokens operatorId={o.operatorId} />
    </Section>
  );
}
