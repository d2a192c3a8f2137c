/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-backend"

#include "va-backend.h"

#include <string.h>

#include "va-error.h"
#include "va-kernel.h"

G_DEFINE_ABSTRACT_TYPE (VaBackend, va_backend, G_TYPE_OBJECT)

VA_ENUM_IMPL (va_device_step, VaDeviceStep, VA_DEVICE_STEP_LAST, [VA_DEVICE_STEP_CREATE] = "create", [VA_DEVICE_STEP_BIND] = "bind",
              [VA_DEVICE_STEP_NODE] = "node", [VA_DEVICE_STEP_VLAN] = "vlan")
VA_ENUM_IMPL (va_pf_health, VaPfHealth,
              VA_PF_HEALTH_LAST, [VA_PF_HEALTH_OK] = "ok", [VA_PF_HEALTH_GONE] = "gone", [VA_PF_HEALTH_UNSUPPORTED] = "unsupported",
              [VA_PF_HEALTH_NO_SRIOV] = "no_sriov", [VA_PF_HEALTH_NO_NETDEV] = "no_netdev", [VA_PF_HEALTH_LINK_DOWN] = "link_down",
              [VA_PF_HEALTH_NO_VDPA_VF] = "no_vdpa_vf", [VA_PF_HEALTH_PREPARE_FAILED] = "prepare_failed", [VA_PF_HEALTH_OTHER] = "other")

static void
va_backend_class_init (VaBackendClass *klass)
{
  g_signal_new ("pfs-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  g_signal_new ("software-stalled", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 2, G_TYPE_STRING,
                G_TYPE_STRING);
}

static void
va_backend_init (VaBackend *self)
{
}

void
va_pf_info_free (VaPfInfo *pf)
{
  if (!pf)
    return;
  g_free (pf->name);
  g_free (pf->pci);
  g_free (pf->health_reason);
  g_free (pf->sriov_reason);
  g_free (pf->model);
  g_free (pf->eswitch);
  g_clear_pointer (&pf->vfs, g_ptr_array_unref);
  g_clear_pointer (&pf->vf_reasons, g_ptr_array_unref);
  g_free (pf);
}

void
va_device_info_free (VaDeviceInfo *dev)
{
  if (!dev)
    return;
  g_free (dev->name);
  g_free (dev->slot);
  g_free (dev->chardev);
  g_free (dev);
}

const char *
va_backend_get_name (VaBackend *self)
{
  g_return_val_if_fail (VA_IS_BACKEND (self), NULL);

  return VA_BACKEND_GET_CLASS (self)->name;
}

GPtrArray *
va_backend_discover (VaBackend *self, GError **error)
{
  g_return_val_if_fail (VA_IS_BACKEND (self), NULL);

  return VA_BACKEND_GET_CLASS (self)->discover (self, error);
}

gboolean
va_backend_prepare_pf (VaBackend *self, VaPfInfo *pf, const VaPoolConfig *pool, GError **error)
{
  g_return_val_if_fail (VA_IS_BACKEND (self), FALSE);
  g_return_val_if_fail (pf != NULL, FALSE);
  g_return_val_if_fail (pool != NULL, FALSE);

  return VA_BACKEND_GET_CLASS (self)->prepare_pf (self, pf, pool, error);
}

VaDeviceInfo *
va_backend_create_device (VaBackend *self, const VaDeviceRequest *req, GError **error)
{
  g_return_val_if_fail (VA_IS_BACKEND (self), NULL);
  g_return_val_if_fail (req != NULL, NULL);

  return VA_BACKEND_GET_CLASS (self)->create_device (self, req, error);
}

gboolean
va_backend_destroy_device (VaBackend *self, const char *slot, const char *name, const VaPoolConfig *pool, GError **error)
{
  g_return_val_if_fail (VA_IS_BACKEND (self), FALSE);
  g_return_val_if_fail (slot != NULL && name != NULL, FALSE);

  return VA_BACKEND_GET_CLASS (self)->destroy_device (self, slot, name, pool, error);
}

VaDeviceInfo *
va_backend_create_software (VaBackend *self, const VaSoftwareRequest *req, GError **error)
{
  VaBackendClass *klass;

  g_return_val_if_fail (VA_IS_BACKEND (self), NULL);
  g_return_val_if_fail (req != NULL && req->mac != NULL && req->bridge != NULL, NULL);

  klass = VA_BACKEND_GET_CLASS (self);
  if (!klass->create_software)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "NIC %s: the %s backend makes no software vDPA devices", req->mac,
                   klass->name);
      return NULL;
    }
  return klass->create_software (self, req, error);
}

gboolean
va_backend_destroy_software (VaBackend *self, const char *name, GError **error)
{
  VaBackendClass *klass;

  g_return_val_if_fail (VA_IS_BACKEND (self), FALSE);
  g_return_val_if_fail (name != NULL, FALSE);

  klass = VA_BACKEND_GET_CLASS (self);
  return !klass->destroy_software || klass->destroy_software (self, name, error);
}

VaDeviceInfo *
va_backend_resume_software (VaBackend *self, const VaSoftwareRequest *req, gboolean *made, GError **error)
{
  VaBackendClass *klass;
  gboolean dummy;

  g_return_val_if_fail (VA_IS_BACKEND (self), NULL);
  g_return_val_if_fail (req != NULL && req->mac != NULL && req->bridge != NULL, NULL);

  klass = VA_BACKEND_GET_CLASS (self);
  if (!klass->resume_software)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "NIC %s: the %s backend makes no software vDPA devices", req->mac,
                   klass->name);
      return NULL;
    }
  return klass->resume_software (self, req, made ? made : &dummy, error);
}

GPtrArray *
va_backend_list_software (VaBackend *self, GError **error)
{
  VaBackendClass *klass;

  g_return_val_if_fail (VA_IS_BACKEND (self), NULL);

  klass = VA_BACKEND_GET_CLASS (self);
  if (!klass->list_software)
    return g_ptr_array_new_with_free_func (g_free);
  return klass->list_software (self, error);
}

char *
va_backend_software_stalled (VaBackend *self, const char *name)
{
  VaBackendClass *klass;

  g_return_val_if_fail (VA_IS_BACKEND (self), NULL);
  g_return_val_if_fail (name != NULL, NULL);

  klass = VA_BACKEND_GET_CLASS (self);
  return klass->software_stalled ? klass->software_stalled (self, name) : NULL;
}

GPtrArray *
va_backend_list_devices (VaBackend *self, GError **error)
{
  g_return_val_if_fail (VA_IS_BACKEND (self), NULL);

  return VA_BACKEND_GET_CLASS (self)->list_devices (self, error);
}

gboolean
va_backend_device_busy (VaBackend *self, const char *chardev)
{
  g_return_val_if_fail (VA_IS_BACKEND (self), FALSE);

  return VA_BACKEND_GET_CLASS (self)->device_busy (self, chardev);
}

char *
va_backend_pool_warning (VaBackend *self, const VaPoolConfig *pool, const char *const *pcis)
{
  VaBackendClass *klass;

  g_return_val_if_fail (VA_IS_BACKEND (self), NULL);
  g_return_val_if_fail (pool != NULL && pcis != NULL, NULL);

  klass = VA_BACKEND_GET_CLASS (self);
  return klass->pool_warning ? klass->pool_warning (self, pool, pcis) : NULL;
}

gboolean
va_backend_repair_vf (VaBackend *self, const char *slot, const char *pf, char **repaired, GError **error)
{
  VaBackendClass *klass;

  g_return_val_if_fail (VA_IS_BACKEND (self), FALSE);
  g_return_val_if_fail (slot != NULL && pf != NULL && repaired != NULL, FALSE);

  *repaired = NULL;
  klass = VA_BACKEND_GET_CLASS (self);
  return klass->repair_vf ? klass->repair_vf (self, slot, pf, repaired, error) : TRUE;
}

VaVfHolder
va_backend_vf_holder (VaBackend *self, const char *slot, char **driver)
{
  VaBackendClass *klass;

  g_return_val_if_fail (VA_IS_BACKEND (self), VA_VF_LIBVIRT);
  g_return_val_if_fail (slot != NULL, VA_VF_LIBVIRT);

  if (driver)
    *driver = NULL;
  klass = VA_BACKEND_GET_CLASS (self);
  return klass->vf_holder ? klass->vf_holder (self, slot, driver) : VA_VF_NOBODY;
}

gboolean
va_pool_config_representor_vlan (const VaPoolConfig *pool)
{
  return pool && pool->kind == VA_POOL_KIND_SRIOV
         && (pool->vlan_method == VA_VLAN_METHOD_BRIDGE || pool->vlan_method == VA_VLAN_METHOD_OVS);
}

gboolean
va_backend_attach_vf (VaBackend *self, const char *slot, const VaPoolConfig *pool, const char *mac, guint16 vlan, GError **error)
{
  VaBackendClass *klass;

  g_return_val_if_fail (VA_IS_BACKEND (self), FALSE);
  g_return_val_if_fail (slot != NULL && pool != NULL && mac != NULL, FALSE);

  klass = VA_BACKEND_GET_CLASS (self);
  if (!klass->attach_vf)
    {
      /* fail closed: a VF on no VLAN would reach the bridge untagged */
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "VF %s: the %s backend cannot put its VLAN on a representor", slot,
                   klass->name);
      return FALSE;
    }
  return klass->attach_vf (self, slot, pool, mac, vlan, error);
}

gboolean
va_backend_detach_vf (VaBackend *self, const char *slot, const VaPoolConfig *pool, GError **error)
{
  VaBackendClass *klass;

  g_return_val_if_fail (VA_IS_BACKEND (self), FALSE);
  g_return_val_if_fail (slot != NULL && pool != NULL, FALSE);

  klass = VA_BACKEND_GET_CLASS (self);
  return !klass->detach_vf || klass->detach_vf (self, slot, pool, error);
}

gboolean
va_backend_secure_vf (VaBackend *self, const char *slot, const VaPoolConfig *pool, gboolean spoofchk, gboolean trust, GError **error)
{
  VaBackendClass *klass;

  g_return_val_if_fail (VA_IS_BACKEND (self), FALSE);
  g_return_val_if_fail (slot != NULL && pool != NULL, FALSE);

  klass = VA_BACKEND_GET_CLASS (self);
  return !klass->secure_vf || klass->secure_vf (self, slot, pool, spoofchk, trust, error);
}

static gboolean
strv_has (char **v, const char *s)
{
  return v && s && g_strv_contains ((const char *const *) v, s);
}

char *
va_pool_config_mismatch (const VaPoolConfig *pool, const VaPfInfo *pf)
{
  g_return_val_if_fail (pool != NULL, NULL);
  g_return_val_if_fail (pf != NULL, NULL);

  if ((pool->type == VA_POOL_TYPE_VDUSE_TEST) != pf->vduse_test)
    return g_strdup (pf->vduse_test ? "the VDUSE test PF: only a type=vduse-test pool takes it" : "type=vduse-test");
  if ((pool->type == VA_POOL_TYPE_NETDEVSIM_TEST) != pf->netdevsim_test)
    return g_strdup (pf->netdevsim_test ? "a netdevsim PF: only a type=netdevsim-test pool takes it" : "type=netdevsim-test");
  /* a PF that carries no vDPA is never offered to a vdpa pool */
  if (pf->sriov_only && pool->kind != VA_POOL_KIND_SRIOV)
    return g_strdup ("kind=vdpa: the PF carries no vDPA, only kind=sriov");
  if (pool->type == VA_POOL_TYPE_VDUSE_TEST)
    return NULL;
  /* A pool with no selector takes no PF: never all of them by accident. */
  if (!pool->match_pf && !pool->match_pci && !pool->match_vendor && !pool->match_device)
    return g_strdup ("no match-pf, match-pci, match-vendor or match-device: takes no PF");
  if (pool->match_pf && !strv_has (pool->match_pf, pf->name))
    {
      g_autofree char *v = g_strjoinv (",", pool->match_pf);
      return g_strdup_printf ("match-pf=%s", v);
    }
  if (pool->match_pci && !strv_has (pool->match_pci, pf->pci))
    {
      g_autofree char *v = g_strjoinv (",", pool->match_pci);
      return g_strdup_printf ("match-pci=%s", v);
    }
  if (pool->match_vendor && pool->match_vendor != pf->vendor)
    return g_strdup_printf ("match-vendor=%04x", pool->match_vendor);
  if (pool->match_device && pool->match_device != pf->device)
    return g_strdup_printf ("match-device=%04x", pool->match_device);
  return NULL;
}

gboolean
va_pool_config_matches (const VaPoolConfig *pool, const VaPfInfo *pf)
{
  g_autofree char *why = NULL;

  g_return_val_if_fail (pool != NULL, FALSE);
  g_return_val_if_fail (pf != NULL, FALSE);

  why = va_pool_config_mismatch (pool, pf);
  return why == NULL;
}

char *
va_pf_info_vf_mgmtdev (const VaPfInfo *pf, guint i)
{
  g_return_val_if_fail (pf != NULL && pf->vfs != NULL, NULL);
  g_return_val_if_fail (i < pf->vfs->len, NULL);

  if (pf->sriov_only || (pf->vf_reasons && i < pf->vf_reasons->len && g_ptr_array_index (pf->vf_reasons, i)))
    return NULL;
  if (pf->vduse_test)
    return g_strdup (VA_KERNEL_VDUSE_PF);
  if (pf->netdevsim_test)
    return g_strdup (VA_KERNEL_NETDEVSIM_MGMTDEV);
  return g_strconcat ("pci/", (const char *) g_ptr_array_index (pf->vfs, i), NULL);
}

gboolean
va_chardev_held_open (const char *path)
{
  g_autoptr (GDir) proc = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *target = NULL;
  const char *pid;

  g_return_val_if_fail (path != NULL, FALSE);

  /* Unknown counts as held: a release that cannot see QEMU's fds (a unit
   * without CAP_SYS_PTRACE, QEMU as libvirt-qemu) must not delete the
   * device under the guest. */
  proc = g_dir_open ("/proc", 0, &error);
  if (!proc)
    {
      g_warning ("cannot tell whether %s is held open, so counting it held: %s", path, error->message);
      return TRUE;
    }
  target = g_canonicalize_filename (path, NULL);
  while ((pid = g_dir_read_name (proc)))
    {
      g_autofree char *fd_dir = NULL;
      g_autoptr (GDir) fds = NULL;
      const char *fd;

      if (!g_ascii_isdigit (pid[0]))
        continue;
      fd_dir = g_build_filename ("/proc", pid, "fd", NULL);
      fds = g_dir_open (fd_dir, 0, &error);
      if (!fds)
        {
          /* a process that exited meanwhile is no holder */
          if (!g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            {
              g_warning ("cannot tell whether %s is held open, so counting it held: %s (does the daemon lack CAP_SYS_PTRACE?)", path,
                         error->message);
              return TRUE;
            }
          g_clear_error (&error);
          continue;
        }
      while ((fd = g_dir_read_name (fds)))
        {
          g_autofree char *link = g_build_filename (fd_dir, fd, NULL);
          g_autofree char *dest = g_file_read_link (link, NULL);

          if (dest && strcmp (dest, target) == 0)
            return TRUE;
        }
    }
  return FALSE;
}
