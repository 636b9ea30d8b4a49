/** Operators (the admin role's): create, change role, disable, reset a password, end sessions, tokens; the role table. */
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
      <h1>Operators</h1>
      <Section title="New operator">
        <form
          class="inline-form"
          aria-label="New operator"
          onSubmit={(e) => {
            const v = formValues(e);
            const form = e.currentTarget as HTMLFormElement;
            void create.run(async () => {
              await post('/operators', { name: v.name, role: v.role, password: v.password });
              form.reset();
              loaded.reload();
            }, 'Operator created.');
          }}
        >
          <Field label="Name" hint="lower-case letters, digits, . _ -">
            <input name="name" required maxLength={64} autocomplete="off" />
          </Field>
          <Field label="Role">
            <select name="role">
              {ROLES.map((r) => (
                <option key={r}>{r}</option>
              ))}
            </select>
          </Field>
          <Field label="Password" hint="at least 12 characters">
            <input name="password" type="password" required minLength={12} autocomplete="new-password" />
          </Field>
          <button type="submit" class="primary" disabled={create.busy}>
            Create operator
          </button>
        </form>
        <ActionNote action={create} />
      </Section>
      <Section title="Operators">
        <Loading loaded={loaded}>
          {(d) => (
            <Table head={['Name', 'Role', 'Status', 'Password changed', 'Created', '']}>
              {d.operators.map((o) => (
                <tr key={o.operatorId} data-operator={o.name}>
                  <td>{o.name}</td>
                  <td>{o.role}</td>
                  <td>
                    <Status value={o.status} />
                  </td>
                  <td>{time(o.passwordChangedAt)}</td>
                  <td>{time(o.createdAt)}</td>
                  <td>
                    <button type="button" onClick={() => setOpen(open === o.operatorId ? null : o.operatorId)}>
                      {open === o.operatorId ? 'Close' : 'Manage'}
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
      <Section title="Roles and what they allow">
        <Loading loaded={roles}>
          {(r) => (
            <Table head={['Role', 'Permissions']}>
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
    <Section title={`Manage ${o.name}`}>
      <form
        class="inline-form"
        aria-label={`Role of ${o.name}`}
        onSubmit={(e) => {
          const v = formValues(e);
          void action.run(async () => {
            await patch(`/operators/${o.operatorId}`, { role: v.role });
            reload();
          }, 'Role changed.');
        }}
      >
        <Field label="Role">
          <select name="role" defaultValue={o.role}>
            {ROLES.map((r) => (
              <option key={r}>{r}</option>
            ))}
          </select>
        </Field>
        <button type="submit">Change role</button>
        <Confirm
          label={o.status === 'ACTIVE' ? 'Disable' : 'Enable'}
          danger={o.status === 'ACTIVE'}
          question={o.status === 'ACTIVE' ? `Disable ${o.name}? Their sessions and tokens stop working.` : `Enable ${o.name}?`}
          onConfirm={() =>
            void action.run(async () => {
              await patch(`/operators/${o.operatorId}`, { status: o.status === 'ACTIVE' ? 'DISABLED' : 'ACTIVE' });
              reload();
            })
          }
        />
        <Confirm
          label="End sessions"
          question={`Sign ${o.name} out everywhere?`}
          onConfirm={() => void action.run(() => post(`/operators/${o.operatorId}/sessions/revoke`), 'Sessions ended.')}
        />
      </form>
      <form
        class="inline-form"
        aria-label={`Reset the password of ${o.name}`}
        onSubmit={(e) => {
          const v = formValues(e);
          const form = e.currentTarget as HTMLFormElement;
          void action.run(async () => {
            await patch(`/operators/${o.operatorId}`, { password: v.password });
            form.reset();
            reload();
          }, 'Password reset; their sessions have ended.');
        }}
      >
        <Field label="New password">
          <input name="password" type="password" required minLength={12} autocomplete="new-password" />
        </Field>
        <button type="submit">Reset password</button>
      </form>
      <ActionNote action={action} />
      <h3>API tokens</h3>
      <Tokens operatorId={o.operatorId} />
    </Section>
  );
}
